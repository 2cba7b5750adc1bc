import type { TaskService } from '@klym/core';
import { TASK_TOOLS_INSTRUCTIONS, registerTaskTools } from '@klym/core/mcp';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';

/** Klym's name and version in `initialize`. */
export const SERVER_INFO = { name: 'klym', version: '0.1.0' } as const;

/**
 * Builds the MCP server of one client session: core's five task tools over `service`, and the `logging`
 * capability (`logging/setLevel` is honoured; the end of each task started in this session is logged to it).
 */
export function createKlymMcpServer(service: TaskService): McpServer {
  const mcp = new McpServer(SERVER_INFO, { capabilities: { logging: {} }, instructions: TASK_TOOLS_INSTRUCTIONS });
  registerTaskTools(mcp, service);
  return mcp;
}
