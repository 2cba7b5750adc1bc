import { TASK_DEFAULTS } from '../../defaults.ts';
import type { TaskRecord } from '../store/task-types.ts';

/** How long runs take here lately: what a refusal that a wait helps tells the caller to wait (`Retry-After`). */
export interface RunTimes {
  /** Counts a task that ended: its time from start to end, if it ran (a task cancelled while waiting did not). */
  record(task: TaskRecord): void;
  /** The median of the last runs counted, in milliseconds; `undefined` before any. */
  median(): number | undefined;
}

/** Keeps the run times of the last `size` tasks that ran and ended (completed or failed; a cancel says nothing of a run's length). */
export function createRunTimes(size: number = TASK_DEFAULTS.runTimesKept): RunTimes {
  const times: number[] = [];
  return {
    record(task) {
      if (task.startedAt === undefined || task.finishedAt === undefined || task.status === 'cancelled') return;
      const ms = Date.parse(task.finishedAt) - Date.parse(task.startedAt);
      if (!Number.isFinite(ms) || ms < 0) return;
      times.push(ms);
      if (times.length > size) times.shift();
    },
    median() {
      if (times.length === 0) return undefined;
      const sorted = times.toSorted((a, b) => a - b);
      const middle = sorted.length >> 1;
      return sorted.length % 2 === 1 ? (sorted[middle] as number) : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2;
    },
  };
}
