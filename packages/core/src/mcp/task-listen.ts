import { SERVER_INFO_META_KEY, SUBSCRIPTION_ID_META_KEY, type JSONRPCRequest } from '@modelcontextprotocol/server';
import { isKlymError } from '../errors.ts';
import type { TaskService } from '../tasks/task-service.ts';
import { isTerminal, type TaskRecord } from '../tasks/store/task-types.ts';
import { taskRpcError } from './agent-task-call.ts';
import { clientCapabilitiesOf, declaresTasksExtension, missingTasksExtension, toMcp20260728Task } from './mcp-2026-07-28-task-server.ts';

const nothing = (): void => {};

/** The most task ids one listen may name: a stream is per caller, not a firehose. */
export const MAX_LISTEN_TASK_IDS = 100;

/** The `taskIds` a `subscriptions/listen` asks notifications of, when it names any. */
export function taskIdsOf(message: JSONRPCRequest): unknown[] | undefined {
  const notifications = (message.params as { notifications?: { taskIds?: unknown } } | undefined)?.notifications;
  return Array.isArray(notifications?.taskIds) ? notifications.taskIds : undefined;
}

/** Options of {@link serveTaskListen}. */
export interface TaskListenOptions {
  readonly principal: string;
  readonly pollIntervalMs: number;
  readonly keepAliveMs: number;
  /** The client went away: the stream ends. */
  readonly signal: AbortSignal;
  /** The open streams' graceful closers, so that a shutdown can end them all. */
  readonly open: Set<() => void>;
  readonly serverInfo: { readonly name: string; readonly version: string };
}

const jsonRpcError = (id: JSONRPCRequest['id'], status: number, code: number, message: string, data?: unknown): Response =>
  Response.json({ jsonrpc: '2.0', id, error: { code, message, ...(data === undefined ? {} : { data }) } }, { status });

/**
 * Serves a `subscriptions/listen` that names `taskIds` (the Tasks extension's task status notifications): an
 * SSE stream that opens with `notifications/subscriptions/acknowledged` naming the ids it will report (the
 * caller's own tasks among them; another principal's or an unknown id is left out, as `tasks/get` would not
 * find it), then each one's current `DetailedTask` (so that a change between the caller's last `tasks/get`
 * and this listen is never lost), then `notifications/tasks` at each start, ask (`input_required`, with its
 * `inputRequests` as a `tasks/get` with the listen's capabilities would show them), resumption and end that this
 * process hears of, every one stamped with the subscription id. When every acknowledged task has ended, or
 * at shutdown, the stream ends with the empty listen result (a graceful close); it ends silently when the
 * client goes. Progress and log messages never go on it, as the extension requires. A client that does not
 * declare the extension gets `-32021`.
 */
export async function serveTaskListen(service: TaskService, message: JSONRPCRequest, options: TaskListenOptions): Promise<Response> {
  if (!declaresTasksExtension((message.params as Record<string, unknown> | undefined)?.['_meta'])) {
    const error = missingTasksExtension();
    return jsonRpcError(message.id, 400, error.code, error.message, error.data);
  }
  const requested = taskIdsOf(message) ?? [];
  if (requested.length > MAX_LISTEN_TASK_IDS || requested.some((id) => typeof id !== 'string')) {
    return jsonRpcError(message.id, 200, -32602, `Invalid params: notifications.taskIds must be at most ${MAX_LISTEN_TASK_IDS} task ids (strings)`);
  }
  const caller = { principal: options.principal };
  // What the listen's envelope declares decides, as for a tasks/get, whether a waiting task shows its elicitation.
  const reader = {
    principal: options.principal,
    pollIntervalMs: options.pollIntervalMs,
    capabilities: clientCapabilitiesOf((message.params as Record<string, unknown> | undefined)?.['_meta']),
  };
  // Another principal's or an unknown id is left out of the acknowledgement; a store that cannot answer is an error, not an empty listen.
  const visible = (id: string): Promise<TaskRecord | undefined> =>
    service.tasks.get(id, caller).catch((error: unknown) => (isKlymError(error, 'TASK_NOT_FOUND') ? undefined : Promise.reject(error)));
  let found: (TaskRecord | undefined)[];
  try {
    found = await Promise.all([...new Set(requested as string[])].map(visible));
  } catch (error) {
    const refusal = taskRpcError(error);
    return jsonRpcError(message.id, 200, refusal.code, refusal.message, refusal.data);
  }
  const tasks = found.filter((task): task is TaskRecord => task !== undefined);
  const watching = new Set(tasks.filter((task) => !isTerminal(task.status)).map((task) => task.id));

  const encoder = new TextEncoder();
  const subscription = { [SUBSCRIPTION_ID_META_KEY]: message.id };
  let controller!: ReadableStreamDefaultController<Uint8Array>;
  let closed = false;
  let queue = Promise.resolve();
  const write = (frame: string): void => {
    if (!closed) controller.enqueue(encoder.encode(frame));
  };
  const notify = (method: string, params: Record<string, unknown>): void =>
    write(`event: message\ndata: ${JSON.stringify({ jsonrpc: '2.0', method, params: { ...params, _meta: subscription } })}\n\n`);
  const tell = (task: TaskRecord): void => {
    // One at a time, in the order heard: a task's end must not overtake its start.
    queue = queue.then(async () => {
      const detailed = await toMcp20260728Task(service, task, reader).catch(() => undefined);
      if (detailed !== undefined) notify('notifications/tasks', detailed);
    });
  };

  let unsubscribe = nothing;
  const keepAlive = setInterval(() => write(': keepalive\n\n'), options.keepAliveMs);
  keepAlive.unref();
  const end = (graceful: boolean): void => {
    if (closed) return;
    if (graceful)
      write(
        `event: message\ndata: ${JSON.stringify({ jsonrpc: '2.0', id: message.id, result: { resultType: 'complete', _meta: { ...subscription, [SERVER_INFO_META_KEY]: options.serverInfo } } })}\n\n`,
      );
    closed = true;
    unsubscribe();
    clearInterval(keepAlive);
    options.open.delete(closeGracefully);
    options.signal.removeEventListener('abort', closeSilently);
    try {
      controller.close();
    } catch {
      // The client closed it first.
    }
  };
  const closeGracefully = (): void => {
    void queue.then(() => end(true));
  };
  const closeSilently = (): void => end(false);

  const stream = new ReadableStream<Uint8Array>({
    start(streamController) {
      controller = streamController;
      notify('notifications/subscriptions/acknowledged', { notifications: { taskIds: tasks.map((task) => task.id) } });
      for (const task of tasks) tell(task);
      unsubscribe = service.onEvent((event) => {
        if (!watching.has(event.task.id)) return;
        if (event.type !== 'task-start' && event.type !== 'task-resume' && event.type !== 'task-input-required' && event.type !== 'task-end') return;
        tell(event.task);
        if (event.type === 'task-end') {
          watching.delete(event.task.id);
          if (watching.size === 0) closeGracefully();
        }
      });
      options.open.add(closeGracefully);
      if (watching.size === 0) closeGracefully();
      // A task that ended between the read above and this subscription: its end was told to no one.
      for (const id of watching) {
        void service.tasks.get(id, caller).then(
          (now) => {
            if (!isTerminal(now.status) || !watching.delete(id)) return;
            tell(now);
            if (watching.size === 0) closeGracefully();
          },
          () => {},
        );
      }
    },
    cancel() {
      closeSilently();
    },
  });
  if (options.signal.aborted) closeSilently();
  else options.signal.addEventListener('abort', closeSilently, { once: true });
  return new Response(stream, {
    status: 200,
    headers: { 'content-type': 'text/event-stream', 'cache-control': 'no-cache, no-transform', connection: 'keep-alive' },
  });
}
