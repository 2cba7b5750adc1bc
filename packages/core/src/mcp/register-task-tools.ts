import type { CallToolResult, McpServer, ProgressToken } from '@modelcontextprotocol/server';
import type { TaskService } from '../tasks/task-service.ts';
import type { TaskRecord } from '../tasks/store/task-types.ts';
import { createProgressReporter, progressTokenOf } from './progress-reporter.ts';
import { onServerClose } from './server-close.ts';
import { TASK_TOOLS, answer } from './task-tool-definitions.ts';

/** The `instructions` an MCP server serving the task tools can give in `initialize`. */
export const TASK_TOOLS_INSTRUCTIONS =
  'Klym runs heavy work for you in the background with its own LLM and the graph tools. Start a task with ' +
  'start_async_agent_task (it answers at once with a task_id), keep talking with your person, and look in ' +
  'with check_task_status when you like. describe_capabilities says which tools, models and budgets a task may use.';

/** What a tool handler is given besides its arguments (the part of the SDK's handler context used here). */
export interface TaskToolExtra {
  /** The HTTP request's verified caller, when it came over HTTP. */
  readonly http?: { readonly authInfo?: { readonly clientId?: string } | undefined } | undefined;
  readonly mcpReq: {
    /**
     * The request's `_meta`: a `progressToken` asks for `notifications/progress` of the task it starts; a W3C
     * `traceparent` (with its `tracestate`) makes the task's span a child of the caller's.
     */
    readonly _meta?: { readonly progressToken?: ProgressToken; readonly traceparent?: unknown; readonly tracestate?: unknown } | undefined;
    /** Aborts when the caller cancels the request or goes away: a query it asked for is interrupted. */
    readonly signal?: AbortSignal;
  };
}

/** Options of {@link registerTaskTools}. */
export interface RegisterTaskToolsOptions {
  /** Who is calling: tasks belong to this principal. @default `extra.http?.authInfo?.clientId ?? 'anonymous'` */
  readonly principal?: (extra: TaskToolExtra) => string;
}

/** The names of the eight task tools. */
export const TASK_TOOL_NAMES = [
  'start_async_agent_task',
  'check_task_status',
  'read_task_artifact',
  'query_task_artifact',
  'reply_to_agent_task',
  'cancel_agent_task',
  'list_agent_tasks',
  'describe_capabilities',
] as const;

const defaultPrincipal = (extra: TaskToolExtra): string => extra.http?.authInfo?.clientId ?? 'anonymous';

/** How a task ended, in one line: its status, and why for a cancel (`shutdown`, `cancelled by caller`) or an error (its code). */
function endLine(task: TaskRecord): string {
  const why = task.status === 'cancelled' ? task.cancelReason : task.status === 'error' ? task.error?.code : undefined;
  return `task ${task.id} ended: ${task.status}${why === undefined ? '' : ` (${why})`}`;
}

/**
 * Registers Klym's eight task tools on `server` over `service`: `start_async_agent_task`,
 * `check_task_status`, `read_task_artifact`, `query_task_artifact`, `reply_to_agent_task`, `cancel_agent_task`, `list_agent_tasks`, `describe_capabilities`. Results are JSON
 * (text and `structuredContent`); failures are `isError` results with `{ error: { code, message } }`. The
 * SDK checks the arguments against the tools' strict input schemas, the only check they get: an unknown or
 * misspelled argument is an `isError` result naming it (`Unrecognized key: "idempotencyKey"`), nothing started.
 * The caller's principal comes from the request (`ctx.http.authInfo.clientId`), never from the session, so tasks
 * survive reconnects. When `server` was created with the `logging` capability, the end of each task
 * started through it is logged to its client (`notifications/message`, `info`, or `error` for a failed
 * task: `task <id> ended: cancelled (shutdown)`, `… ended: error (TASK_TIMEOUT)`), at the level the client set with `logging/setLevel`.
 * A start carrying `_meta.progressToken` gets `notifications/progress` of its task's steps while the session
 * is open, at most once a second (`progress`: steps done, `total`: the step budget, `message`: the tools
 * called and the tokens so far); the start has been answered by then, so the client must accept progress of
 * a token whose request is over. Call it before `server.connect()`.
 *
 * @example
 * ```ts
 * const server = new McpServer({ name: 'my-agent', version: '1.0.0' }, { capabilities: { logging: {} }, instructions: TASK_TOOLS_INSTRUCTIONS })
 * registerTaskTools(server, service)
 * await server.connect(transport)
 * ```
 */
export function registerTaskTools(server: McpServer, service: TaskService, options: RegisterTaskToolsOptions = {}): void {
  const principalOf = options.principal ?? defaultPrincipal;
  const started = new Set<string>();
  const progress = createProgressReporter(server, service);

  for (const tool of TASK_TOOLS) {
    const watched = tool.name === 'start_async_agent_task';
    // The definitions erase each tool's argument type; the SDK parsed `args` with the tool's own schema.
    const handler = (args: never, extra: TaskToolExtra): Promise<CallToolResult> =>
      answer(async () => {
        const principal = principalOf(extra);
        const view = await tool.run(service, args, principal, extra.mcpReq['_meta'], extra.mcpReq.signal);
        if (watched) {
          const taskId = (view as { task_id: string }).task_id;
          started.add(taskId);
          const token = progressTokenOf(extra.mcpReq);
          if (token !== undefined) progress.watch(taskId, principal, token);
        }
        return view;
      });
    server.registerTool(tool.name, tool.config, handler as never);
  }

  const unsubscribe = service.onEvent((event) => {
    if (event.type !== 'task-end' || !started.has(event.task.id)) return;
    started.delete(event.task.id);
    if (!server.isConnected()) return;
    const level = event.task.status === 'error' ? 'error' : 'info';
    // The level set by logging/setLevel is kept per session id, so the message must name it.
    const sessionId = server.server.transport?.sessionId;
    server.server.sendLoggingMessage({ level, logger: 'klym', data: endLine(event.task) }, sessionId).catch(() => {
      // The client went away as the task ended: there is nobody left to tell.
    });
  });
  onServerClose(server, () => {
    unsubscribe();
    progress.close();
  });
}
