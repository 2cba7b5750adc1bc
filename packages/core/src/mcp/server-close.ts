import type { McpServer } from '@modelcontextprotocol/server';

/**
 * Runs `cleanup` when `server`'s session closes, then whatever `onclose` it had before: tools registered on
 * one server (the task tools, the agent task tool) each let go of their subscriptions without undoing the others'.
 */
export function onServerClose(server: McpServer, cleanup: () => void): void {
  const previous = server.server.onclose;
  server.server.onclose = () => {
    cleanup();
    previous?.();
  };
}
