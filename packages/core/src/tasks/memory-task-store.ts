import { BoundedLog, type BoundedLogOptions, type TaskLogPage } from './task-log.ts';
import type { TaskFilter, TaskPatch, TaskRecord, TaskStore } from './task-types.ts';

/** Options of {@link createMemoryTaskStore}. */
export interface MemoryTaskStoreOptions {
  /** Bounds of each task's log. @default { maxBytes: 262_144, maxEntryBytes: 4_096 } */
  readonly log?: BoundedLogOptions;
}

const EMPTY_PAGE: TaskLogPage = { entries: [], nextCursor: 0, lastSeq: 0, dropped: 0, more: false };

/**
 * The default {@link TaskStore}: tasks and their bounded logs in this process's memory. Lost on restart;
 * a durable or shared store implements the same interface. Transitions are atomic because each one
 * checks and writes within one synchronous turn.
 */
export function createMemoryTaskStore(options: MemoryTaskStoreOptions = {}): TaskStore {
  const tasks = new Map<string, TaskRecord>();
  const logs = new Map<string, BoundedLog>();

  const apply = (id: string, patch: TaskPatch): TaskRecord | undefined => {
    const task = tasks.get(id);
    if (task === undefined) return undefined;
    const next = { ...task, ...patch };
    tasks.set(id, next);
    return next;
  };

  return {
    async insert(task) {
      tasks.set(task.id, task);
      logs.set(task.id, new BoundedLog(options.log));
    },
    async get(id) {
      return tasks.get(id);
    },
    async transition(id, from, patch) {
      const task = tasks.get(id);
      if (task === undefined || !from.includes(task.status)) return undefined;
      return apply(id, patch);
    },
    async update(id, patch) {
      const { status: _ignored, ...rest } = patch as TaskPatch;
      return apply(id, rest);
    },
    async list(filter: TaskFilter = {}) {
      return [...tasks.values()]
        .filter((task) => (filter.principal === undefined || task.principal === filter.principal) && (filter.status === undefined || task.status === filter.status))
        .toReversed();
    },
    async delete(id) {
      tasks.delete(id);
      logs.delete(id);
    },
    appendLog(id, type, data) {
      logs.get(id)?.append(type, data);
    },
    async readLog(id, after, limit) {
      return logs.get(id)?.read(after, limit) ?? EMPTY_PAGE;
    },
    async tailLog(id, count) {
      return logs.get(id)?.tail(count) ?? EMPTY_PAGE;
    },
  };
}
