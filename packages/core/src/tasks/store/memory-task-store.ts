import { getHeapStatistics } from 'node:v8';
import type { AgentCheckpoint } from '../../agent/types.ts';
import { keptBytes, storeLimitError, taskLimitError, tasksToEvict, type ArtifactLimits } from '../../artifacts/artifact-limit.ts';
import { ARTIFACT_DEFAULTS, TASK_DEFAULTS } from '../../defaults.ts';
import { KlymError } from '../../errors.ts';
import { createMemoryOutbox } from '../../webhooks/memory-outbox.ts';
import { withoutPushTarget, withPushTarget } from '../../webhooks/push-target-list.ts';
import { BoundedLog, type BoundedLogOptions, type TaskLogPage } from './task-log.ts';
import {
  isTerminal,
  type TaskFilter,
  type TaskListPage,
  type TaskPatch,
  type TaskRecord,
  type TaskStatus,
  type TaskStore,
  type DaySpend,
} from './task-types.ts';
import type { StoredArtifact } from '../../artifacts/artifact-types.ts';
import { utf8Marks, utf8Range, type Utf8Marks } from '../../artifacts/utf8-range.ts';
import { positiveInteger } from '../../internal/positive.ts';

/** Options of {@link createMemoryTaskStore}. */
export interface MemoryTaskStoreOptions {
  /** Bounds of each task's log. @default { maxBytes: 262_144, maxEntryBytes: 4_096 } */
  readonly log?: BoundedLogOptions;
  /**
   * Caps on the artifacts kept. @default { maxBytesPerTask: ARTIFACT_DEFAULTS.maxBytesPerTask (1 GiB), maxBytes:
   * a quarter of V8's heap limit, at most ARTIFACT_DEFAULTS.maxBytes }
   */
  readonly artifacts?: ArtifactLimits;
}

const NO_SPEND: DaySpend = { tokens: 0, usd: 0 };
const EMPTY_PAGE: TaskLogPage = { entries: [], nextCursor: 0, lastSeq: 0, dropped: 0, more: false };

interface Entry {
  task: TaskRecord;
  readonly seq: number;
  readonly log: BoundedLog;
  checkpoint?: AgentCheckpoint;
  artifacts?: Map<string, StoredArtifact>;
  /** What its artifacts count against the caps. */
  artifactBytes: number;
}

/**
 * The library's default {@link TaskStore}: tasks, their bounded logs, checkpoints, artifacts and webhook
 * outbox in this process's memory. Lost on restart (`createSqliteTaskStore` of `@klym/core/sqlite` is the
 * durable one). Transitions, push target changes and artifact saves are atomic because each one checks (or
 * reads) and writes within one synchronous turn.
 *
 * @throws {KlymError} `CONFIG_INVALID` for an artifact cap that is not a positive integer
 */
export function createMemoryTaskStore(options: MemoryTaskStoreOptions = {}): TaskStore {
  const maxBytesPerTask = positiveInteger('artifacts.maxBytesPerTask', options.artifacts?.maxBytesPerTask ?? ARTIFACT_DEFAULTS.maxBytesPerTask);
  const maxArtifactBytes = positiveInteger('artifacts.maxBytes', options.artifacts?.maxBytes ?? defaultMaxArtifactBytes());
  // Insertion order is creation order: a Map keeps it, and `seq` makes it a cursor.
  const tasks = new Map<string, Entry>();
  const keys = new Map<string, string>();
  let nextSeq = 0;
  // Where each artifact's bytes fall in its characters, marked as a range is first read: they go with it.
  const marks = new WeakMap<StoredArtifact, Utf8Marks>();
  // Bytes all tasks' artifacts count against `maxArtifactBytes`.
  let keptInAll = 0;
  /** Each principal's spend by day, keyed by `[principal, day]` as JSON. */
  const spent = new Map<string, DaySpend>();
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
  const dropArtifacts = (entry: Entry): void => {
    delete entry.artifacts;
    keptInAll -= entry.artifactBytes;
    entry.artifactBytes = 0;
  };
  const remove = (entry: Entry): void => {
    dropArtifacts(entry);
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
      tasks.set(task.id, { task, seq: ++nextSeq, log: new BoundedLog(options.log), artifactBytes: 0 });
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
    async addPushTarget(id, target, max) {
      const task = tasks.get(id)?.task;
      return task === undefined ? undefined : apply(id, { push: withPushTarget(id, task.push, target, max) });
    },
    async removePushTarget(id, targetId) {
      const task = tasks.get(id)?.task;
      return task === undefined ? undefined : apply(id, { push: withoutPushTarget(task.push, targetId) });
    },
    async list(filter = {}, page = {}) {
      const limit = positiveInteger('limit', page.limit ?? TASK_DEFAULTS.listPageSize, 'INVALID_ARGUMENT');
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
      const counts: Record<TaskStatus, number> = { pending: 0, running: 0, input_required: 0, completed: 0, error: 0, cancelled: 0 };
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
      if (entry === undefined) return;
      const replaced = entry.artifacts?.get(artifact.id);
      const bytes = keptBytes(artifact) - (replaced === undefined ? 0 : keptBytes(replaced));
      if (entry.artifactBytes + bytes > maxBytesPerTask) throw taskLimitError(artifact, maxBytesPerTask, entry.artifactBytes);
      if (keptInAll + bytes > maxArtifactBytes) {
        const finished = [...tasks.values()]
          .filter((other) => other !== entry && other.artifacts !== undefined && isTerminal(other.task.status) && other.task.finishedAt !== undefined)
          .toSorted((a, b) => Date.parse(a.task.finishedAt as string) - Date.parse(b.task.finishedAt as string) || a.seq - b.seq)
          .map((other) => ({ taskId: other.task.id, bytes: other.artifactBytes }));
        const evicted = tasksToEvict(finished, keptInAll, bytes, maxArtifactBytes);
        if (evicted === undefined)
          throw storeLimitError(
            artifact,
            maxArtifactBytes,
            keptInAll,
            finished.reduce((sum, other) => sum + other.bytes, 0),
          );
        for (const taskId of evicted) dropArtifacts(tasks.get(taskId) as Entry);
      }
      (entry.artifacts ??= new Map()).set(artifact.id, artifact);
      entry.artifactBytes += bytes;
      keptInAll += bytes;
    },
    async loadArtifact(id, artifactId) {
      return tasks.get(id)?.artifacts?.get(artifactId);
    },
    async loadArtifactRange(id, artifactId, start, end) {
      const artifact = tasks.get(id)?.artifacts?.get(artifactId);
      if (artifact === undefined) return undefined;
      let marked = marks.get(artifact);
      if (marked === undefined) marks.set(artifact, (marked = utf8Marks(artifact.text)));
      return utf8Range(artifact.text, marked, start, end);
    },
    async listArtifacts(id) {
      return [...(tasks.get(id)?.artifacts?.values() ?? [])].map(({ text: _text, original: _original, ...info }) => info);
    },
    async artifactBytes() {
      return keptInAll;
    },
    async addSpend(principal, day, spend) {
      const key = JSON.stringify([principal, day]);
      const was = spent.get(key) ?? NO_SPEND;
      const total = { tokens: was.tokens + spend.tokens, usd: was.usd + spend.usd };
      spent.set(key, total);
      return total;
    },
    async spendOf(principal, day) {
      return spent.get(JSON.stringify([principal, day])) ?? NO_SPEND;
    },
    ...outbox,
    // Nothing to release: what it holds stays readable until the last reference goes.
    async close() {},
    [Symbol.asyncDispose]: () => store.close(),
  };
  return store;
}

const keyOf = (principal: string, key: string): string => `${principal}\u0000${key}`;

/**
 * A quarter of V8's heap limit, at most ARTIFACT_DEFAULTS.maxBytes: artifacts held here are strings on the
 * heap, a string may take twice its UTF-8 bytes there (V8 keeps any text beyond Latin-1 as UTF-16), and
 * passing the limit kills the process with every task it holds.
 */
const defaultMaxArtifactBytes = (): number => Math.min(ARTIFACT_DEFAULTS.maxBytes, Math.floor(getHeapStatistics().heap_size_limit / 4));

const matches = (task: TaskRecord, filter: TaskFilter): boolean =>
  (filter.principal === undefined || task.principal === filter.principal) && (filter.status === undefined || task.status === filter.status);

/** A list cursor: the insertion number of the last task of a page, opaque to callers. */
const encodeCursor = (seq: number): string => Buffer.from(`t${seq}`).toString('base64url');

function decodeCursor(cursor: string): number {
  const seq = /^t(\d+)$/.exec(Buffer.from(cursor, 'base64url').toString())?.[1];
  if (seq === undefined) throw new KlymError('INVALID_ARGUMENT', '`cursor`: not a cursor this list gave; pass the `next_cursor` of the page before, or none');
  return Number(seq);
}
