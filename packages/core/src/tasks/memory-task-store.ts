import type { AgentCheckpoint } from '../agent/types.ts';
import { TASK_DEFAULTS } from '../defaults.ts';
import { KlymError } from '../errors.ts';
import { createMemoryOutbox } from '../webhooks/memory-outbox.ts';
import { BoundedLog, type BoundedLogOptions, type TaskLogPage } from './task-log.ts';
import { isTerminal, type TaskFilter, type TaskListPage, type TaskPatch, type TaskRecord, type TaskStatus, type TaskStore } from './task-types.ts';
import type { StoredArtifact } from '../artifacts/artifact-types.ts';

/** Options of {@link createMemoryTaskStore}. */
export interface MemoryTaskStoreOptions {
  /** Bounds of each task's log. @default { maxBytes: 262_144, maxEntryBytes: 4_096 } */
  readonly log?: BoundedLogOptions;
}

const EMPTY_PAGE: TaskLogPage = { entries: [], nextCursor: 0, lastSeq: 0, dropped: 0, more: false };

interface Entry {
  task: TaskRecord;
  readonly seq: number;
  readonly log: BoundedLog;
  checkpoint?: AgentCheckpoint;
  artifacts?: Map<string, StoredArtifact>;
}

/**
 * The library's default {@link TaskStore}: tasks, their bounded logs, checkpoints and webhook outbox in
 * this process's memory. Lost on restart (`createSqliteTaskStore` of `@klym/core/sqlite` is the durable one).
 * Transitions are atomic because each one checks and writes within one synchronous turn.
 */
export function createMemoryTaskStore(options: MemoryTaskStoreOptions = {}): TaskStore {
  // Insertion order is creation order: a Map keeps it, and `seq` makes it a cursor.
  const tasks = new Map<string, Entry>();
  const keys = new Map<string, string>();
  let nextSeq = 0;
  // Webhook messages outlive their task's eviction: a receiver is still owed the event.
  const outbox = createMemoryOutbox();

  const apply = (id: string, patch: TaskPatch): TaskRecord | undefined => {
    const entry = tasks.get(id);
    if (entry === undefined) return undefined;
    entry.task = { ...entry.task, ...patch };
    // A checkpoint is only for resuming a run: a finished task lets its go.
    if (isTerminal(entry.task.status)) delete entry.checkpoint;
    return entry.task;
  };
  const remove = (entry: Entry): void => {
    tasks.delete(entry.task.id);
    const key = entry.task.request.idempotencyKey;
    if (key !== undefined) keys.delete(keyOf(entry.task.principal, key));
  };

  const store: TaskStore = {
    async insert(task) {
      if (tasks.has(task.id)) throw new KlymError('INVALID_ARGUMENT', `A task with the id "${task.id}" is already stored`);
      const key = task.request.idempotencyKey;
      if (key !== undefined) {
        const existing = tasks.get(keys.get(keyOf(task.principal, key)) ?? '');
        if (existing !== undefined) return existing.task;
        keys.set(keyOf(task.principal, key), task.id);
      }
      tasks.set(task.id, { task, seq: ++nextSeq, log: new BoundedLog(options.log) });
      return task;
    },
    async get(id) {
      return tasks.get(id)?.task;
    },
    async findByIdempotencyKey(principal, key) {
      return tasks.get(keys.get(keyOf(principal, key)) ?? '')?.task;
    },
    async transition(id, from, patch) {
      const task = tasks.get(id)?.task;
      if (task === undefined || !from.includes(task.status)) return undefined;
      return apply(id, patch);
    },
    async update(id, patch) {
      const { status: _ignored, ...rest } = patch as TaskPatch;
      return apply(id, rest);
    },
    async list(filter = {}, page = {}) {
      const limit = page.limit ?? TASK_DEFAULTS.listPageSize;
      if (!Number.isInteger(limit) || limit < 1) throw new KlymError('INVALID_ARGUMENT', `\`limit\`: expected a positive integer, got ${String(limit)}`);
      const before = page.cursor === undefined ? Number.POSITIVE_INFINITY : decodeCursor(page.cursor);
      const found: Entry[] = [];
      let total = 0;
      for (const entry of [...tasks.values()].toReversed()) {
        if (!matches(entry.task, filter)) continue;
        total++;
        if (entry.seq < before && found.length < limit) found.push(entry);
      }
      const last = found.at(-1);
      const older = last !== undefined && [...tasks.values()].some((entry) => entry.seq < last.seq && matches(entry.task, filter));
      const result: TaskListPage = { tasks: found.map((entry) => entry.task), total, ...(older ? { nextCursor: encodeCursor(last.seq) } : {}) };
      return result;
    },
    async counts() {
      const counts: Record<TaskStatus, number> = { pending: 0, running: 0, completed: 0, error: 0, cancelled: 0 };
      for (const { task } of tasks.values()) counts[task.status]++;
      return counts;
    },
    async unfinished() {
      return [...tasks.values()].filter(({ task }) => !isTerminal(task.status) || task.writeBack?.status === 'pending').map(({ task }) => task);
    },
    async evict(before) {
      const evicted: TaskRecord[] = [];
      // Deleting from a Map while iterating it is safe: entries not yet reached are still visited.
      for (const entry of tasks.values()) {
        const { task } = entry;
        if (isTerminal(task.status) && task.finishedAt !== undefined && Date.parse(task.finishedAt) < before.getTime()) {
          remove(entry);
          evicted.push(task);
        }
      }
      return evicted;
    },
    appendLog(id, type, data) {
      tasks.get(id)?.log.append(type, data);
    },
    async readLog(id, after, limit) {
      return tasks.get(id)?.log.read(after, limit) ?? EMPTY_PAGE;
    },
    async tailLog(id, count) {
      return tasks.get(id)?.log.tail(count) ?? EMPTY_PAGE;
    },
    saveCheckpoint(id, checkpoint) {
      const entry = tasks.get(id);
      if (entry !== undefined) entry.checkpoint = checkpoint;
    },
    async loadCheckpoint(id) {
      return tasks.get(id)?.checkpoint;
    },
    async saveArtifact(id, artifact) {
      const entry = tasks.get(id);
      if (entry !== undefined) (entry.artifacts ??= new Map()).set(artifact.id, artifact);
    },
    async loadArtifact(id, artifactId) {
      return tasks.get(id)?.artifacts?.get(artifactId);
    },
    async listArtifacts(id) {
      return [...(tasks.get(id)?.artifacts?.values() ?? [])].map(({ text: _text, ...info }) => info);
    },
    ...outbox,
    // Nothing to release: what it holds stays readable until the last reference goes.
    async close() {},
    [Symbol.asyncDispose]: () => store.close(),
  };
  return store;
}

const keyOf = (principal: string, key: string): string => `${principal}\u0000${key}`;

const matches = (task: TaskRecord, filter: TaskFilter): boolean =>
  (filter.principal === undefined || task.principal === filter.principal) && (filter.status === undefined || task.status === filter.status);

/** A list cursor: the insertion number of the last task of a page, opaque to callers. */
const encodeCursor = (seq: number): string => Buffer.from(`t${seq}`).toString('base64url');

function decodeCursor(cursor: string): number {
  const seq = /^t(\d+)$/.exec(Buffer.from(cursor, 'base64url').toString())?.[1];
  if (seq === undefined) throw new KlymError('INVALID_ARGUMENT', '`cursor`: not a cursor this list gave; pass the `next_cursor` of the page before, or none');
  return Number(seq);
}
