import type { Caller } from '../tasks/task-manager-types.ts';
import type { TaskService } from '../tasks/task-service.ts';
import { isTerminal, type TaskRecord } from '../tasks/store/task-types.ts';

/** Options of {@link watchTask}. */
export interface WatchTaskOptions {
  /** Ends the watch (the client went, a wait's limit passed). */
  readonly signal?: AbortSignal;
  /**
   * How often the store is read when no event of this process says the task changed: a task run by a
   * worker elsewhere is heard of through the store. @default 1_000
   */
  readonly pollIntervalMs?: number;
}

/**
 * The task each time its status, step or question changes, starting with how it is now, until it ends (the last one
 * yielded is terminal) or `signal` aborts. Woken by the service's task events, so a change in this process
 * is seen at once; one elsewhere (a worker on a shared queue) within `pollIntervalMs`.
 * @throws {KlymError} `TASK_NOT_FOUND` when `caller` cannot see the task (or it was evicted meanwhile)
 */
export async function* watchTask(
  service: TaskService,
  id: string,
  caller: Caller,
  options: WatchTaskOptions = {},
): AsyncGenerator<TaskRecord, void, undefined> {
  const { signal } = options;
  const pollIntervalMs = options.pollIntervalMs ?? 1_000;
  let changed = false;
  let wake: (() => void) | undefined;
  const unsubscribe = service.onEvent((event) => {
    if (event.task.id !== id) return;
    changed = true;
    wake?.();
  });
  try {
    let last: string | undefined;
    for (;;) {
      if (signal?.aborted === true) return;
      changed = false;
      const task = await service.tasks.get(id, caller);
      // A new question is a change even when the status and step read as before (one asked right after another was answered).
      const key = `${task.status}\u0000${task.currentStep}\u0000${task.status === 'input_required' ? (task.input?.askedAt ?? '') : ''}`;
      if (key !== last) {
        last = key;
        yield task;
      }
      if (isTerminal(task.status)) return;
      // An event between the read and here already set `changed`: read again at once rather than miss it.
      if (!changed) await pause(pollIntervalMs, signal, (resume) => (wake = resume));
      wake = undefined;
    }
  } finally {
    unsubscribe();
  }
}

/** Waits `ms`, or until `signal` aborts or `register`'s resume is called. */
function pause(ms: number, signal: AbortSignal | undefined, register: (resume: () => void) => void): Promise<void> {
  return new Promise((resolve) => {
    const resume = (): void => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', resume);
      resolve();
    };
    const timer = setTimeout(resume, ms);
    signal?.addEventListener('abort', resume, { once: true });
    register(resume);
  });
}
