import { McpServer, MissingRequiredClientCapabilityError, ProtocolErrorCode, type ClientCapabilities, type InputRequests } from '@modelcontextprotocol/server';
import { MCP_TASK_DEFAULTS } from '../defaults.ts';
import type { TaskService } from '../tasks/task-service.ts';
import type { TaskRecord } from '../tasks/store/task-types.ts';
import { ANY_RESULT, TASK_ID_PARAMS, asTaskRpc, listAgentTaskTool, parseAgentTaskArgs } from './agent-task-call.ts';
import { MCP_STATUS, statusMessage, toToolResult } from './mcp-task-view.ts';
import { currentHandler } from '../internal/sdk-handlers.ts';
import { startOptionsOf } from './start-options.ts';
import { answerInput, elicitationOf, inputKeyOf, takesFormElicitation, waitingInput } from './task-input.ts';
import { AGENT_TASK_TOOL, TASK_TOOLS, answer } from './task-tool-definitions.ts';

/** The Tasks extension's identifier (SEP-2663), in `capabilities.extensions` and in a request's client capabilities. */
export const TASKS_EXTENSION_ID = 'io.modelcontextprotocol/tasks';

/** The client capabilities a 2026-07-28 request must declare for a task: the error `-32021` names them. */
const TASKS_REQUIRED = { extensions: { [TASKS_EXTENSION_ID]: {} } };

/** A Klym task as the Tasks extension shows it (`DetailedTask`): flat, with its result or error inline once it ended. */
export interface Mcp20260728Task {
  readonly [key: string]: unknown;
  readonly taskId: string;
  readonly status: 'working' | 'input_required' | 'completed' | 'failed' | 'cancelled';
  readonly statusMessage: string;
  readonly createdAt: string;
  readonly lastUpdatedAt: string;
  /** From creation until Klym may forget the task: unknown (`null`) while it runs, since it is kept `ttlMs` after its end. */
  readonly ttlMs: number | null;
  readonly pollIntervalMs: number;
  /** While `input_required`: the elicitation asking for the reply, keyed by the ask (empty to a client that takes no form elicitation). */
  readonly inputRequests?: InputRequests;
  readonly result?: Record<string, unknown>;
  readonly error?: { readonly code: number; readonly message: string; readonly data: { readonly code: string } };
}

/** Options of {@link createMcp20260728TaskServer}. */
export interface Mcp20260728TaskServerOptions {
  /** `serverInfo`. */
  readonly info: { readonly name: string; readonly version: string };
  /** What the server tells clients in `server/discover`. */
  readonly instructions?: string;
  /** The `pollIntervalMs` clients are told. @default MCP_TASK_DEFAULTS.pollIntervalMs */
  readonly pollIntervalMs?: number;
}

/**
 * Who is asking: the `clientId` of the verified `authInfo` the caller handed the request with, `anonymous`
 * without one (a server run without auth).
 */
export const principalOf = (authInfo?: { readonly clientId?: string }): string => authInfo?.clientId ?? 'anonymous';

/** The client capabilities a 2026-07-28 request's envelope (its `_meta`) declares. */
export function clientCapabilitiesOf(envelope: unknown): ClientCapabilities | undefined {
  return (envelope as Record<string, ClientCapabilities | undefined> | undefined)?.['io.modelcontextprotocol/clientCapabilities'];
}

/** Whether a 2026-07-28 request's envelope declares the Tasks extension. */
export function declaresTasksExtension(envelope: unknown): boolean {
  return (clientCapabilitiesOf(envelope)?.extensions as Record<string, unknown> | undefined)?.[TASKS_EXTENSION_ID] !== undefined;
}

/** The `-32021` a request without the extension gets where only a task will do. */
export const missingTasksExtension = (): MissingRequiredClientCapabilityError =>
  new MissingRequiredClientCapabilityError({ requiredCapabilities: TASKS_REQUIRED });

/** Who reads a task, and how it is shown to them. */
export interface Mcp20260728Reader {
  readonly principal: string;
  readonly pollIntervalMs: number;
  /** What the reading request's envelope declares: a task waiting for input shows its elicitation only to a client that takes one. */
  readonly capabilities?: ClientCapabilities | undefined;
}

/**
 * Reads a task of `reader.principal` as the extension shows it; another principal's task, or an evicted one, is
 * the spec's `-32602` "Task not found", exactly as one that never existed.
 */
export function readMcp20260728Task(service: TaskService, taskId: string, reader: Mcp20260728Reader): Promise<Mcp20260728Task> {
  return asTaskRpc(async () => toMcp20260728Task(service, await service.tasks.get(taskId, { principal: reader.principal }), reader));
}

/**
 * A task record as a `DetailedTask`, in the statuses the 2025 era shows: `pending` and `running` are
 * `working`; a completed task carries inline the `CallToolResult` `run_agent_task` would have answered had it
 * waited; a Klym `error` is `failed` with a JSON-RPC `-32603` naming its Klym code; a cancelled one says why
 * in its `statusMessage`. A task waiting for its caller is `input_required` with `inputRequests` (the
 * extension's "Task Polling", response 2): to a client that declares form elicitation, one `elicitation/create`
 * keyed by the ask ({@link inputKeyOf}), answered through `tasks/update`; to one that does not, none (a server
 * must not send an input request of a capability the client did not declare: "Multi Round-Trip Requests",
 * server requirements), its `statusMessage` naming `reply_to_agent_task` instead.
 */
export async function toMcp20260728Task(service: TaskService, task: TaskRecord, reader: Mcp20260728Reader): Promise<Mcp20260728Task> {
  const { principal, pollIntervalMs } = reader;
  const elicits = takesFormElicitation(reader.capabilities);
  const base = {
    taskId: task.id,
    statusMessage: statusMessage(task, elicits),
    createdAt: task.createdAt,
    lastUpdatedAt: task.finishedAt ?? task.startedAt ?? task.createdAt,
    ttlMs: task.finishedAt === undefined ? null : Date.parse(task.finishedAt) - Date.parse(task.createdAt) + service.ttlMs,
    pollIntervalMs,
  };
  // The same statuses the 2025 era shows.
  const status = MCP_STATUS[task.status] as Mcp20260728Task['status'];
  if (task.status === 'input_required') {
    const input = waitingInput(task);
    const inputRequests: InputRequests =
      input === undefined || !elicits ? {} : { [inputKeyOf(input)]: { method: 'elicitation/create', params: elicitationOf(input) } };
    return { ...base, status, inputRequests };
  }
  if (task.status === 'error') {
    const code = task.error?.code ?? 'INTERNAL';
    return {
      ...base,
      status,
      error: { code: ProtocolErrorCode.InternalError, message: `${code}: ${task.error?.message ?? 'the task failed'}`, data: { code } },
    };
  }
  if (task.status !== 'completed') return { ...base, status };
  return { ...base, status, result: toToolResult(task, await service.status({ task_id: task.id }, principal)) as Record<string, unknown> };
}

/**
 * Builds the v2 SDK server that answers 2026-07-28 requests: Klym's eight task tools (the same definitions the
 * 2025-11-25 sessions serve), `run_agent_task` under the Tasks extension, and the extension's `tasks/get`,
 * `tasks/update` and `tasks/cancel`. It holds no caller: each request's tasks are those of the principal its
 * `authInfo` names ({@link principalOf}, from the handler context's `http.authInfo`), so one server serves one
 * request after another, of any principal. A stateless request has no session to send progress or log
 * messages to later: task transitions reach a client through `subscriptions/listen` instead.
 *
 * `run_agent_task` answers the flat task handle (`resultType: "task"`) to a request that declares the
 * extension, and `-32021` naming it otherwise: Klym's work never fits a synchronous answer, and
 * `start_async_agent_task` is the tool for a client without tasks. The task methods answer `-32021` too
 * without the extension, and `-32602` for a task the caller cannot see.
 */
export function createMcp20260728TaskServer(service: TaskService, options: Mcp20260728TaskServerOptions): McpServer {
  const pollIntervalMs = options.pollIntervalMs ?? MCP_TASK_DEFAULTS.pollIntervalMs;
  const server = new McpServer(options.info, {
    capabilities: { tools: {}, extensions: { [TASKS_EXTENSION_ID]: {} } },
    ...(options.instructions === undefined ? {} : { instructions: options.instructions }),
  });
  type Context = {
    mcpReq: { _meta?: unknown; envelope?: unknown; signal?: AbortSignal; inputResponses?: Record<string, unknown> };
    http?: { authInfo?: { clientId?: string } };
  };
  const metaOf = (ctx: Context): unknown => ({ ...(ctx.mcpReq['_meta'] as object | undefined), ...(ctx.mcpReq.envelope as object | undefined) });
  const callerOf = (ctx: Context): string => principalOf(ctx.http?.authInfo);
  const readerOf = (ctx: Context): Mcp20260728Reader => ({ principal: callerOf(ctx), pollIntervalMs, capabilities: clientCapabilitiesOf(metaOf(ctx)) });

  for (const tool of TASK_TOOLS) {
    const handler = (args: never, ctx: Context) => answer(() => tool.run(service, args, callerOf(ctx), metaOf(ctx), ctx.mcpReq.signal));
    server.registerTool(tool.name, tool.config, handler as never);
  }

  listAgentTaskTool(
    server,
    'The same work as start_async_agent_task, served under the MCP Tasks extension (io.modelcontextprotocol/tasks): ' +
      'the call answers a task handle at once; follow it with tasks/get (its result inline when done) or ' +
      'subscriptions/listen, and stop it with tasks/cancel. The task id is a Klym task_id, so check_task_status and ' +
      'cancel_agent_task work on it too. Takes the same arguments.',
  );
  const runAgentTask = async (params: { arguments?: unknown }, ctx: Context): Promise<Record<string, unknown>> => {
    if (!declaresTasksExtension(ctx.mcpReq.envelope)) throw missingTasksExtension();
    const args = parseAgentTaskArgs(params.arguments);
    const reader = readerOf(ctx);
    const { task_id: taskId } = await asTaskRpc(() => service.start(args, reader.principal, startOptionsOf(metaOf(ctx))));
    // Durably created before the handle is answered: a tasks/get of it resolves from now on, on any front.
    return { resultType: 'task', ...(await readMcp20260728Task(service, taskId, reader)) };
  };
  answerBeforeTools(server, AGENT_TASK_TOOL.name, runAgentTask);

  const withTask =
    <Params extends { taskId: string }>(run: (params: Params, reader: Mcp20260728Reader, ctx: Context) => Promise<Record<string, unknown>>) =>
    async (params: Params, ctx: Context): Promise<Record<string, unknown>> => {
      if (!declaresTasksExtension(ctx.mcpReq.envelope)) throw missingTasksExtension();
      return run(params, readerOf(ctx), ctx);
    };
  server.server.setRequestHandler(
    'tasks/get',
    { params: TASK_ID_PARAMS, result: ANY_RESULT },
    withTask(({ taskId }, reader) => readMcp20260728Task(service, taskId, reader)) as never,
  );
  // "Task Update Requests": a response keyed by the ask the task waits on replies to it (accept answers or
  // decides, decline denies an approval or declines a question, cancel leaves it waiting: see `answerInput`);
  // a response to any other key (never issued, answered already, superseded) is ignored, as the spec has it.
  // A response that does not fit its ask is `-32602` naming what is wrong ("Multi Round-Trip Requests", error
  // handling). The acknowledgement is empty; the task's status follows, eventually. The SDK lifts the
  // request's `inputResponses` out of its params into `ctx.mcpReq.inputResponses` (the MRTR retry field).
  server.server.setRequestHandler(
    'tasks/update',
    { params: TASK_ID_PARAMS, result: ANY_RESULT },
    withTask(async ({ taskId }, { principal }, ctx) => {
      await asTaskRpc(async () => {
        await service.tasks.get(taskId, { principal });
        for (const [key, response] of Object.entries(ctx.mcpReq.inputResponses ?? {})) await answerInput(service, taskId, principal, key, response);
      });
      return {};
    }) as never,
  );
  server.server.setRequestHandler(
    'tasks/cancel',
    { params: TASK_ID_PARAMS, result: ANY_RESULT },
    withTask(async ({ taskId }, { principal }) => {
      // Cooperative: an ended task stays as it was, and the acknowledgement is the same.
      await asTaskRpc(() => service.tasks.cancel(taskId, { principal }));
      return {};
    }) as never,
  );
  return server;
}

/** Makes `tools/call` of `name` answer `run` (whose errors stay JSON-RPC errors), and every other tool as the SDK's own `tools/call` does. */
function answerBeforeTools(server: McpServer, name: string, run: (params: { arguments?: unknown }, ctx: never) => Promise<Record<string, unknown>>): void {
  const tools = currentHandler(server, 'tools/call');
  server.server.setRequestHandler(
    'tools/call',
    (request, ctx) => (request.params.name === name ? run(request.params, ctx as never) : tools(request, ctx as never)) as never,
  );
}
