import { isKlymError } from '@klym/core';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { KlymService } from './klym-service.ts';
import { cancelTaskShape, checkTaskShape, listTasksShape, startTaskShape } from './task-request.ts';

/** Klym's name and version in `initialize`. */
export const SERVER_INFO = { name: 'klym', version: '0.1.0' } as const;

const INSTRUCTIONS =
  'Klym runs heavy work for you in the background with its own LLM and the graph tools. Start a task with ' +
  'start_async_agent_task (it answers at once with a task_id), keep talking with your person, and look in ' +
  'with check_task_status when you like. describe_capabilities says which tools, models and budgets a task may use.';

/** Wraps a task operation as a tool handler: its JSON as `structuredContent` and as text; a failure as an `isError` result with its code. */
const tool =
  (operation: (args: unknown, principal: string) => Promise<Record<string, unknown>>) =>
  async (args: unknown, extra: { authInfo?: { clientId?: string } }): Promise<CallToolResult> => {
    try {
      const result = await operation(args, extra.authInfo?.clientId ?? 'anonymous');
      return { content: [{ type: 'text', text: JSON.stringify(result) }], structuredContent: result };
    } catch (error) {
      const failure = isKlymError(error)
        ? { code: error.code, message: error.message }
        : { code: 'INTERNAL', message: `Klym failed: ${error instanceof Error ? error.message : String(error)}` };
      return { isError: true, content: [{ type: 'text', text: JSON.stringify({ error: failure }) }], structuredContent: { error: failure } };
    }
  };

/**
 * Builds the MCP server of one client session: the five task tools and the `logging` capability
 * (`logging/setLevel` is honoured; the end of each task started in this session is logged to it).
 * The caller's principal comes from the request's `authInfo.clientId` (`anonymous` without auth), never
 * from the session, so tasks survive reconnects.
 */
export function createKlymMcpServer(service: KlymService): McpServer {
  const mcp = new McpServer(SERVER_INFO, { capabilities: { logging: {} }, instructions: INSTRUCTIONS });
  const started = new Set<string>();

  mcp.registerTool(
    'start_async_agent_task',
    {
      title: 'Start a background task',
      description:
        'Hands a piece of heavy work (research in the graph, analysis, many tool calls) to Klym, which runs it in the ' +
        'background with its own LLM and tools. Answers at once with {task_id, status}; the work goes on after. ' +
        'Write `prompt` as a complete brief: Klym sees nothing else of your conversation. Poll with check_task_status. ' +
        'Optional: `model` (a name from describe_capabilities), `tools` (narrow the allowed tools), `budget` (capped by ' +
        "the server's maximums), `record_result: true` to save the result in the graph as an Analysis node linked to today.",
      inputSchema: startTaskShape,
      annotations: { readOnlyHint: false, destructiveHint: false, openWorldHint: true },
    },
    tool(async (args, principal) => {
      const result = await service.startTask(args, principal);
      started.add(String(result.task_id));
      return result;
    }),
  );

  mcp.registerTool(
    'check_task_status',
    {
      title: 'Check a background task',
      description:
        'Where a task is: status (pending, running, completed, error, cancelled), current step, budget use, the last ' +
        'few log lines with a `next_cursor`, and the result when done (cut at 400 characters with result_truncated: true). ' +
        'Small by default so your context stays clean; pass `full_result: true` for the whole result, or `log_after: ' +
        '<cursor>` to page through the full log.',
      inputSchema: checkTaskShape,
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    tool((args, principal) => service.checkTask(args, principal)),
  );

  mcp.registerTool(
    'cancel_agent_task',
    {
      title: 'Cancel a background task',
      description:
        'Stops a pending or running task (its tool calls in flight are cancelled upstream). A task that already ended ' +
        'stays as it was; the reply says so.',
      inputSchema: cancelTaskShape,
      annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
    },
    tool((args, principal) => service.cancelTask(args, principal)),
  );

  mcp.registerTool(
    'list_agent_tasks',
    {
      title: 'List your background tasks',
      description: 'Your tasks, newest first (at most 50), with status and step; filter with `status`.',
      inputSchema: listTasksShape,
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    tool((args, principal) => service.listTasks(args, principal)),
  );

  mcp.registerTool(
    'describe_capabilities',
    {
      title: "What Klym's tasks may use",
      description:
        'The upstream servers and their state, the namespaced tool names a task may call (for `tools.allow`), the ' +
        'models (for `model`), the tool policies (for `tools.policy`), and the default and maximum budgets.',
      inputSchema: {},
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    tool(() => service.describeCapabilities()),
  );

  const unsubscribe = service.onTaskEvent((event) => {
    if (event.type !== 'task-end' || !started.has(event.task.id) || !mcp.isConnected()) return;
    const level = event.task.status === 'error' ? 'error' : 'info';
    // The level set by logging/setLevel is kept per session id, so the message must name it.
    const sessionId = mcp.server.transport?.sessionId;
    mcp.server.sendLoggingMessage({ level, logger: 'klym', data: `task ${event.task.id} ended: ${event.task.status}` }, sessionId).catch(() => {});
  });
  const previous = mcp.server.onclose;
  mcp.server.onclose = () => {
    unsubscribe();
    previous?.();
  };
  return mcp;
}
