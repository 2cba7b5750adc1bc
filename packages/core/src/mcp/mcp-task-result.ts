import { RELATED_TASK_META_KEY, type CallToolResult, type ElicitResult, type RequestOptions } from '@modelcontextprotocol/server';
import { isKlymError } from '../errors.ts';
import type { TaskService } from '../tasks/task-service.ts';
import { isTerminal, type TaskRecord } from '../tasks/store/task-types.ts';
import { taskNotFound } from './agent-task-call.ts';
import type { McpTaskStore } from './mcp-task-store.ts';
import { answerInput, elicitationOf, inputKeyOf, waitingInput } from './task-input.ts';

/** What `tasks/result` needs of its handler's context: its cancellation, and a request to the client related to it. */
export interface TaskResultContext {
  readonly signal: AbortSignal;
  /** Sends `elicitation/create` to the client as part of this `tasks/result` (on its stream, over Streamable HTTP). */
  readonly elicit: (params: Record<string, unknown>, options: RequestOptions) => Promise<ElicitResult>;
}

// Setting a timer past this fires it at once: it is "until the task stops waiting", which ends the elicitation instead.
const LONGEST_TIMER_MS = 2 ** 31 - 1;

/**
 * Serves a 2025-11-25 `tasks/result` for the caller's task `taskId`: it blocks until the task ends and answers
 * its `CallToolResult`, related to the task (the tasks page, "Result Retrieval"). While the task waits for its
 * caller (`input_required`) and the session's client takes form elicitations, it asks the client there, as
 * the page's "Input Required Status" has it: an `elicitation/create` carrying the task in
 * `_meta["io.modelcontextprotocol/related-task"]`, whose result replies to the task ({@link answerInput}:
 * `accept` answers or decides, `decline` denies an approval or tells the model the question was declined,
 * `cancel` leaves it waiting). Each ask is elicited once per `tasks/result`: one the client cancels or fails
 * (an error answer) waits on, for `reply_to_agent_task` or the next `tasks/result`. An elicitation is withdrawn
 * (the request cancelled) when the task stops waiting on it: answered elsewhere first, cancelled, timed out.
 * A client without elicitation just waits, the task answered through `reply_to_agent_task`.
 * @throws {ProtocolError} `-32602` for a task the caller cannot see; {@link KlymError} `INVALID_ARGUMENT` for an elicitation result that does not fit the ask
 */
export async function serveTaskResult(service: TaskService, store: McpTaskStore, taskId: string, context: TaskResultContext): Promise<CallToolResult> {
  const caller = { principal: store.principal };
  const read = (): Promise<TaskRecord> =>
    service.tasks.get(taskId, caller).catch((error: unknown) => Promise.reject(isKlymError(error, 'TASK_NOT_FOUND') ? taskNotFound() : error));
  const asked = new Set<string>();
  /** The ask this request should elicit now, if any. */
  const toAsk = (task: TaskRecord) => {
    const input = waitingInput(task);
    return input !== undefined && store.elicits() && !asked.has(inputKeyOf(input)) ? input : undefined;
  };

  let task = await read();
  while (!isTerminal(task.status)) {
    const input = toAsk(task);
    if (input === undefined) {
      task = await watchTask(service, read, store.pollIntervalMs, context.signal, taskId, (now) => isTerminal(now.status) || toAsk(now) !== undefined);
      continue;
    }
    const key = inputKeyOf(input);
    asked.add(key);
    const withdrawn = new AbortController();
    const stillWaiting = new AbortController();
    // Ends the elicitation once the task stops waiting on this ask, whoever moved it.
    void watchTask(service, read, store.pollIntervalMs, AbortSignal.any([context.signal, stillWaiting.signal]), taskId, (now) => {
      const waiting = waitingInput(now);
      return waiting === undefined || inputKeyOf(waiting) !== key;
    }).then(
      () => withdrawn.abort(new Error(`Task ${taskId} no longer waits on this question`)),
      () => {},
    );
    try {
      const params = { ...elicitationOf(input), _meta: { [RELATED_TASK_META_KEY]: { taskId } } };
      const result = await context.elicit(params, { signal: AbortSignal.any([context.signal, withdrawn.signal]), timeout: LONGEST_TIMER_MS });
      await answerInput(service, taskId, store.principal, key, result);
    } catch (error) {
      context.signal.throwIfAborted();
      // An elicitation withdrawn or failed by the client leaves the ask waiting; a result that does not fit it is the client's error.
      if (isKlymError(error, 'INVALID_ARGUMENT')) throw error;
    } finally {
      stillWaiting.abort();
    }
    task = await read();
  }
  const result = await store.getTaskResult(taskId);
  return { ...result, _meta: { ...result['_meta'], [RELATED_TASK_META_KEY]: { taskId } } };
}

/**
 * Resolves with the task once `done` holds of it: it is read each `pollIntervalMs`, and at once at each event of
 * it this process hears. Rejects with `signal`'s reason as soon as it aborts (the request is cancelled, its
 * session closes), so nothing goes on reading the store for a client that is gone.
 */
async function watchTask(
  service: TaskService,
  read: () => Promise<TaskRecord>,
  pollIntervalMs: number,
  signal: AbortSignal,
  taskId: string,
  done: (task: TaskRecord) => boolean,
): Promise<TaskRecord> {
  for (;;) {
    signal.throwIfAborted();
    const task = await read();
    if (done(task)) return task;
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(moved, pollIntervalMs);
      const unsubscribe = service.onEvent((event) => {
        if (event.task.id === taskId) moved();
      });
      // Aborted while the store was read: no `abort` event is coming.
      if (signal.aborted) return aborted();
      signal.addEventListener('abort', aborted, { once: true });
      function stop(): void {
        clearTimeout(timer);
        unsubscribe();
        signal.removeEventListener('abort', aborted);
      }
      function moved(): void {
        stop();
        resolve();
      }
      function aborted(): void {
        stop();
        reject(signal.reason);
      }
    });
  }
}
