import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult, ProgressToken } from '@modelcontextprotocol/sdk/types.js';
import { isKlymError } from '../errors.ts';
import { cancelTaskSchema, checkTaskSchema, listTasksSchema, noArgumentsSchema, readArtifactSchema, startTaskSchema } from '../tasks/task-request.ts';
import type { TaskService } from '../tasks/task-service.ts';
import type { TaskRecord } from '../tasks/task-types.ts';
import { createProgressReporter, progressTokenOf } from './progress-reporter.ts';
import { startOptionsOf } from './start-options.ts';

/** The `instructions` an MCP server serving the task tools can give in `initialize`. */
export const TASK_TOOLS_INSTRUCTIONS =
  'Klym runs heavy work for you in the background with its own LLM and the graph tools. Start a task with ' +
  'start_async_agent_task (it answers at once with a task_id), keep talking with your person, and look in ' +
  'with check_task_status when you like. describe_capabilities says which tools, models and budgets a task may use.';

/** What a tool handler is given besides its arguments (the part of the SDK's `RequestHandlerExtra` used here). */
export interface TaskToolExtra {
  readonly authInfo?: { readonly clientId?: string } | undefined;
  /**
   * The request's `_meta`: a `progressToken` asks for `notifications/progress` of the task it starts; a W3C
   * `traceparent` (with its `tracestate`) makes the task's span a child of the caller's.
   */
  readonly _meta?: { readonly progressToken?: ProgressToken; readonly traceparent?: unknown; readonly tracestate?: unknown } | undefined;
}

/** Options of {@link registerTaskTools}. */
export interface RegisterTaskToolsOptions {
  /** Who is calling: tasks belong to this principal. @default `extra.authInfo?.clientId ?? 'anonymous'` */
  readonly principal?: (extra: TaskToolExtra) => string;
}

/** The names of the six task tools. */
export const TASK_TOOL_NAMES = ['start_async_agent_task', 'check_task_status', 'read_task_artifact', 'cancel_agent_task', 'list_agent_tasks', 'describe_capabilities'] as const;

const defaultPrincipal = (extra: TaskToolExtra): string => extra.authInfo?.clientId ?? 'anonymous';

/** A view as a tool result: its JSON as text and as `structuredContent`; a failure as an `isError` result with its code. */
async function answer(produce: () => Promise<object>): Promise<CallToolResult> {
  try {
    const result = (await produce()) as Record<string, unknown>;
    return { content: [{ type: 'text', text: JSON.stringify(result) }], structuredContent: result };
  } catch (error) {
    const failure = isKlymError(error)
      ? { code: error.code, message: error.message }
      : { code: 'INTERNAL', message: `Klym failed: ${error instanceof Error ? error.message : String(error)}` };
    return { isError: true, content: [{ type: 'text', text: JSON.stringify({ error: failure }) }], structuredContent: { error: failure } };
  }
}

/** How a task ended, in one line: its status, and why for a cancel (`shutdown`, `cancelled by caller`) or an error (its code). */
function endLine(task: TaskRecord): string {
  const why = task.status === 'cancelled' ? task.cancelReason : task.status === 'error' ? task.error?.code : undefined;
  return `task ${task.id} ended: ${task.status}${why === undefined ? '' : ` (${why})`}`;
}

/**
 * Registers Klym's six task tools on `server` over `service`: `start_async_agent_task`,
 * `check_task_status`, `read_task_artifact`, `cancel_agent_task`, `list_agent_tasks`, `describe_capabilities`. Results are JSON
 * (text and `structuredContent`); failures are `isError` results with `{ error: { code, message } }`. The
 * SDK checks the arguments against the tools' strict input schemas, the only check they get: an unknown or
 * misspelled argument is an `isError` result naming it (`Unrecognized key: "idempotencyKey"`), nothing started.
 * The caller's principal comes from the request (`authInfo.clientId`), never from the session, so tasks
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

  server.registerTool(
    'start_async_agent_task',
    {
      title: 'Start a background task',
      description:
        'Hands a piece of heavy work (research in the graph, analysis, many tool calls) to Klym, which runs it in the ' +
        'background with its own LLM and tools. Answers at once with {task_id, status}; the work goes on after. ' +
        'Write `prompt` as a complete brief: Klym sees nothing else of your conversation. Poll with check_task_status. ' +
        'Optional: `model` (a name from describe_capabilities), `tools` (narrow the allowed tools), `budget` (capped by ' +
        "the server's maximums), `record_result: true` to save the result in the graph as an Analysis node linked to today, " +
        '`idempotency_key` to retry safely: a start with a key you used before answers that task instead of starting another.',
      inputSchema: startTaskSchema,
      annotations: { readOnlyHint: false, destructiveHint: false, openWorldHint: true },
    },
    (args, extra) =>
      answer(async () => {
        const principal = principalOf(extra);
        const view = await service.start(args, principal, startOptionsOf(extra['_meta']));
        started.add(view.task_id);
        const token = progressTokenOf(extra);
        if (token !== undefined) progress.watch(view.task_id, principal, token);
        return view;
      }),
  );

  server.registerTool(
    'check_task_status',
    {
      title: 'Check a background task',
      description:
        'Where a task is: status (pending, running, completed, error, cancelled), current step, budget use beside its ' +
        'limits, elapsed time, the last few log lines with a `next_cursor`, and the final answer when done (cut at 400 ' +
        'characters with result_truncated: true). Small by default so your context stays clean; pass `full_result: true` ' +
        'for the whole answer and every step’s text, or `log_after: <cursor>` to page through the full log.',
      inputSchema: checkTaskSchema,
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    (args, extra) => answer(() => service.status(args, principalOf(extra))),
  );

  server.registerTool(
    'read_task_artifact',
    {
      title: "Read a background task's artifact",
      description:
        'Lines of an artifact of your task: a tool result too big for any context that the task kept whole (check_task_status ' +
        'lists them as `artifacts`). From line `offset` (0-based, default 0), `limit` lines (default 100, at most 500); ' +
        'long lines are cut. The reply has `next_offset` when more lines follow.',
      inputSchema: readArtifactSchema,
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    (args, extra) => answer(() => service.readArtifact(args, principalOf(extra))),
  );

  server.registerTool(
    'cancel_agent_task',
    {
      title: 'Cancel a background task',
      description:
        'Stops a pending or running task (its tool calls in flight are cancelled upstream). A task that already ended ' +
        'stays as it was; the reply says so.',
      inputSchema: cancelTaskSchema,
      annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
    },
    (args, extra) => answer(() => service.cancel(args, principalOf(extra))),
  );

  server.registerTool(
    'list_agent_tasks',
    {
      title: 'List your background tasks',
      description:
        'Your tasks, newest first, with status and step, a page at a time (50 unless `limit`); filter with `status`. ' +
        'When there are older ones the reply has a `next_cursor`: pass it as `cursor` for the next page.',
      inputSchema: listTasksSchema,
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    (args, extra) => answer(() => service.list(args, principalOf(extra))),
  );

  server.registerTool(
    'describe_capabilities',
    {
      title: "What Klym's tasks may use",
      description:
        'The upstream servers and their state, the namespaced tool names a task may call (for `tools.allow`), the ' +
        'models (for `model`), the tool policies (for `tools.policy`), and the default and maximum budgets.',
      inputSchema: noArgumentsSchema,
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    () => answer(() => service.capabilities()),
  );

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
  const previous = server.server.onclose;
  server.server.onclose = () => {
    unsubscribe();
    progress.close();
    previous?.();
  };
}
