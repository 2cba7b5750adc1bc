import type { StreamResponse, Task } from '@a2a-js/sdk';
import type { Caller } from '../tasks/task-manager-types.ts';
import type { TaskService } from '../tasks/task-service.ts';
import { isTerminal, type TaskRecord } from '../tasks/store/task-types.ts';
import { toA2aTask } from './a2a-task.ts';
import { watchTask } from './task-watch.ts';

/** The least time between two progress updates of one stream. */
const PROGRESS_INTERVAL_MS = 1_000;

/** Options of {@link streamTask} and {@link waitForStop}. */
export interface A2aWatchOptions {
  /** Ends the watch (the client went, a wait's limit passed). */
  readonly signal?: AbortSignal;
  /** How often the store is read when no event of this process says the task changed. @default 1_000 */
  readonly pollIntervalMs?: number;
}

/** Where an A2A task stops for a blocking `SendMessage` and a `SendStreamingMessage`: it ended, or it waits for its caller. */
export const isStop = (task: Pick<TaskRecord, 'status'>): boolean => isTerminal(task.status) || task.status === 'input_required';

/** The task, its artifacts listed, as A2A shows it; with `history`, its messages too (`length`: the most recent that many). */
export async function readA2aTask(service: TaskService, id: string, caller: Caller, history?: { readonly length?: number }): Promise<Task> {
  const { task, artifacts } = await service.tasks.read(id, caller, { tail: 0 });
  return toA2aTask(task, artifacts, history);
}

/**
 * Waits until the task stops ({@link isStop}) or `signal` aborts. A blocking `SendMessage` returns there: "the
 * operation MUST wait until the task reaches a terminal state … or an interrupted state (`TASK_STATE_INPUT_REQUIRED`,
 * `TASK_STATE_AUTH_REQUIRED`)" (A2A §3.2.2). An answered task is `pending` again at once, so the question it answered
 * is not a stop: the wait after an answer goes on to the next question or the end.
 */
export async function waitForStop(service: TaskService, id: string, caller: Caller, options: A2aWatchOptions = {}): Promise<void> {
  for await (const task of watchTask(service, id, caller, options)) if (isStop(task)) return;
}

/**
 * A task's A2A event stream: the `Task`, then a status update at each change of state, step or question (progress
 * within one state at most once a second), the result artifact before the end's status update; it ends with the
 * task. With `untilInterrupted` it also ends after the update that says the task waits for its caller
 * (`TASK_STATE_INPUT_REQUIRED`), as a `SendStreamingMessage` does: "status or artifact update events until the task
 * reaches a terminal or interrupted state, at which point the stream closes" (A2A §11.7); the caller answers with
 * a new message, whose stream goes on. Without it (`SubscribeToTask`), the stream shows the question and goes on
 * after the answer until the task ends: it "MUST terminate when the task reaches a terminal state" and may be used
 * "with any task that is not in a terminal state" (A2A §3.1.6), one waiting for input included.
 */
export async function* streamTask(
  service: TaskService,
  id: string,
  caller: Caller,
  options: A2aWatchOptions & { readonly untilInterrupted: boolean },
): AsyncGenerator<StreamResponse, void, undefined> {
  let first = true;
  let sent: { readonly key: string; readonly at: number } | undefined;
  for await (const task of watchTask(service, id, caller, options)) {
    const ended = isTerminal(task.status) || (options.untilInterrupted && task.status === 'input_required');
    // Each transition (a new question among them) goes at once; progress within a status (a new step) at most once a second, as a run's steps can come faster.
    const key = `${task.status}\u0000${task.status === 'input_required' ? (task.input?.askedAt ?? '') : ''}`;
    if (sent !== undefined && sent.key === key && Date.now() - sent.at < PROGRESS_INTERVAL_MS) continue;
    sent = { key, at: Date.now() };
    const view = first || ended ? await readA2aTask(service, id, caller) : toA2aTask(task);
    if (first) {
      first = false;
      yield { payload: { $case: 'task', value: view } };
      if (ended) return;
      continue;
    }
    for (const artifact of view.artifacts) {
      yield { payload: { $case: 'artifactUpdate', value: { taskId: id, contextId: id, artifact, append: false, lastChunk: true, metadata: undefined } } };
    }
    yield { payload: { $case: 'statusUpdate', value: { taskId: id, contextId: id, status: view.status, metadata: view.metadata } } };
    if (ended) return;
  }
}
