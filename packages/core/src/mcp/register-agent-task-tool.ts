import { ProtocolError, type McpServer, type ServerCapabilities, type Task } from '@modelcontextprotocol/server';
import { z } from 'zod';
import type { TaskService } from '../tasks/task-service.ts';
import { ANY_RESULT, TASK_ID_PARAMS, asTaskRpc, listAgentTaskTool, parseAgentTaskArgs, taskNotFound } from './agent-task-call.ts';
import { serveTaskResult } from './mcp-task-result.ts';
import type { McpTaskStore } from './mcp-task-store.ts';
import { createProgressReporter, progressTokenOf } from './progress-reporter.ts';
import { onServerClose } from './server-close.ts';
import { currentHandler, replaceHandler } from '../internal/sdk-handlers.ts';
import { AGENT_TASK_TOOL } from './task-tool-definitions.ts';

/** The `tasks` capability a server serving `run_agent_task` declares: task-augmented `tools/call`, `tasks/list` and `tasks/cancel`. */
export const MCP_TASKS_CAPABILITY = { list: {}, cancel: {}, requests: { tools: { call: {} } } } as const satisfies NonNullable<ServerCapabilities['tasks']>;

/** The name of the MCP-native task tool. */
export const AGENT_TASK_TOOL_NAME = AGENT_TASK_TOOL.name;

const TERMINAL: ReadonlySet<Task['status']> = new Set(['completed', 'failed', 'cancelled']);

type Handler = (request: { params: { name: string; arguments?: unknown; task?: unknown; _meta?: unknown } }, ctx: HandlerContext) => Promise<unknown>;
interface HandlerContext {
  readonly mcpReq: {
    readonly _meta?: { readonly progressToken?: string | number };
    readonly signal: AbortSignal;
  };
}

const cursorParams = z.looseObject({ cursor: z.string().optional() }).optional();

/** A task method's handler, its failures as the JSON-RPC errors the tasks spec names. */
const answering = <Params, Result>(run: (params: Params, ctx: HandlerContext) => Promise<Result>) =>
  ((params: Params, ctx: HandlerContext) => asTaskRpc(() => run(params, ctx))) as never;

/**
 * Registers `run_agent_task` on `server` as an MCP 2025-11-25 task tool (`execution.taskSupport:
 * "required"`), with the `tasks/get`, `tasks/result`, `tasks/list` and `tasks/cancel` it needs, over `store`.
 * A call with `task` answers `CreateTaskResult` at once; the task is a Klym task (`check_task_status`,
 * `list_agent_tasks`, `cancel_agent_task` see it, and the `tasks/*` requests see the ones those tools
 * started), and `tasks/result` waits for its end and answers the `CallToolResult` of its final answer. A task
 * waiting for its caller is `input_required`, its question the `statusMessage`; `tasks/result` asks a client
 * that takes form elicitations for the reply there ({@link serveTaskResult}); any client may reply with
 * `reply_to_agent_task`, which the `statusMessage` names to a client without elicitation. While
 * its session is open the client is sent `notifications/tasks/status` at each transition of the tasks it
 * started here (as the task manager of this process hears them: on a front whose tasks run on workers,
 * their end), and, when the call carried `_meta.progressToken`, `notifications/progress` of its steps at
 * most once a second. A start that cannot be made answers the JSON-RPC error naming why (`-32602` for a bad
 * argument or a call without `task`, `-32603` with the Klym code otherwise, e.g. `TASK_QUEUE_FULL`).
 * `server` must declare the {@link MCP_TASKS_CAPABILITY}. Call it after registering its other tools and
 * before `server.connect()`.
 *
 * The v2 SDK has no 2025-11-25 task runtime: it lists no `execution`, and its `tools/call` refuses a
 * `CreateTaskResult`. So the tool's listing gets its `execution` set, and a call of it is answered before
 * the SDK's `tools/call` (through the server's private handler map: a later SDK that moves it makes this
 * throw as the server is built).
 *
 * @example
 * ```ts
 * const server = new McpServer(info, { capabilities: { logging: {}, tasks: MCP_TASKS_CAPABILITY } })
 * const taskStore = createMcpTaskStore(service, { principal, elicits: () => takesFormElicitation(server.server.getClientCapabilities()) })
 * registerTaskTools(server, service)
 * registerAgentTaskTool(server, service, taskStore)
 * ```
 */
export function registerAgentTaskTool(server: McpServer, service: TaskService, store: McpTaskStore): void {
  const started = new Set<string>();
  const progress = createProgressReporter(server, service);

  const registered = listAgentTaskTool(
    server,
    'The same work as start_async_agent_task, served as an MCP task: call it with `task`, follow it with tasks/get ' +
      '(or notifications/tasks/status), and read the final answer with tasks/result. The task id is a Klym task_id, so ' +
      'check_task_status, list_agent_tasks and cancel_agent_task work on it too. Takes the same arguments.',
  );
  (registered as { execution?: unknown }).execution = { taskSupport: 'required' };

  const tools = currentHandler(server, 'tools/call');
  // Set as it is, not through setRequestHandler: the SDK would check the answer as a CallToolResult.
  replaceHandler(server, 'tools/call', (async (request: Parameters<Handler>[0], ctx: HandlerContext) => {
    if (request.params.name !== AGENT_TASK_TOOL.name) return tools(request, ctx as never);
    if (request.params.task === undefined)
      throw new ProtocolError(-32602, 'run_agent_task runs only as a task: call it with `task` (MCP tasks, 2025-11-25), or use start_async_agent_task');
    const args = parseAgentTaskArgs(request.params.arguments);
    const task = await asTaskRpc(() => store.start(args, request.params['_meta']));
    started.add(task.taskId);
    const token = progressTokenOf(ctx.mcpReq);
    if (token !== undefined) progress.watch(task.taskId, store.principal, token);
    // The task may have moved while it was being created, before the events below could be heard for it.
    void catchUp(task);
    return { task };
  }) as never);

  server.server.setRequestHandler(
    'tasks/get',
    { params: TASK_ID_PARAMS, result: ANY_RESULT },
    answering(async ({ taskId }: { taskId: string }) => (await store.getTask(taskId)) ?? Promise.reject(taskNotFound())),
  );
  server.server.setRequestHandler(
    'tasks/result',
    { params: TASK_ID_PARAMS, result: ANY_RESULT },
    answering(async ({ taskId }: { taskId: string }, ctx) =>
      serveTaskResult(service, store, taskId, {
        signal: ctx.mcpReq.signal,
        // Not `ctx.mcpReq.send`: Klym answers each Streamable HTTP POST with one JSON body, which has no room for
        // a request on the way; so it goes where the notifications go, the session's GET stream (the tasks page,
        // "Input Required Status": clients expect messages on any stream), carrying the task it belongs to.
        elicit: (params, options) => server.server.request({ method: 'elicitation/create', params }, options),
      }),
    ),
  );
  server.server.setRequestHandler(
    'tasks/list',
    { params: cursorParams, result: ANY_RESULT },
    answering(async (params: { cursor?: string } | undefined) => store.listTasks(params?.cursor)),
  );
  server.server.setRequestHandler(
    'tasks/cancel',
    { params: TASK_ID_PARAMS, result: ANY_RESULT },
    answering(async ({ taskId }: { taskId: string }) => store.cancelTask(taskId)),
  );

  const tell = (task: Task): void => {
    if (!server.isConnected()) return;
    server.server.notification({ method: 'notifications/tasks/status', params: task } as never).catch(() => {
      // The client went away as the task moved: there is nobody left to tell.
    });
  };
  const catchUp = async (created: Task): Promise<void> => {
    const now = await store.getTask(created.taskId).catch(() => null);
    if (now === null || !started.has(created.taskId) || (now.status === created.status && now.statusMessage === created.statusMessage)) return;
    if (TERMINAL.has(now.status)) started.delete(created.taskId);
    tell(now);
  };
  const unsubscribe = service.onEvent((event) => {
    if (!started.has(event.task.id)) return;
    if (event.type !== 'task-start' && event.type !== 'task-resume' && event.type !== 'task-input-required' && event.type !== 'task-end') return;
    if (event.type === 'task-end') started.delete(event.task.id);
    tell(store.toTask(event.task));
  });
  onServerClose(server, () => {
    unsubscribe();
    progress.close();
  });
}
