import type { ArtifactLimits } from '../../../artifacts/artifact-limit.ts';
import { ARTIFACT_DEFAULTS, TASK_DEFAULTS } from '../../../defaults.ts';
import { isKlymError, KlymError } from '../../../errors.ts';
import { createCheckpointTable } from './checkpoint-table.ts';
import { createLogTable } from './log-table.ts';
import { openTaskDatabase } from './open-database.ts';
import { createOutboxTable } from './outbox-table.ts';
import { createTaskTable } from './task-table.ts';
import type { BoundedLogOptions } from '../task-log.ts';
import { isTerminal, type TaskPatch, type TaskRecord, type TaskStore } from '../task-types.ts';
import { createArtifactTable } from './artifact-table.ts';
import { createSpendTable } from './spend-table.ts';
import { withoutPushTarget, withPushTarget } from '../../../webhooks/push-target-list.ts';
import { positiveInteger } from '../../../internal/positive.ts';

/** Finished tasks one eviction transaction deletes at most. */
const EVICT_CHUNK = 20;

/** Options of {@link createSqliteTaskStore}. */
export interface SqliteTaskStoreOptions {
  /** The database file; created with its directory when missing. One Klym process at a time may use it. */
  readonly path: string;
  /** Bounds of each task's log, as in the in-memory store. @default { maxBytes: 262_144, maxEntryBytes: 4_096 } */
  readonly log?: BoundedLogOptions;
  /**
   * Log entries buffered at most before they are written without waiting for the next tick: the bound
   * of one write transaction, hence of how long a status read can wait behind one. @default 256
   */
  readonly batchEntries?: number;
  /**
   * Caps on the artifacts kept: per task, and in all (past it, a save first drops the artifacts of the tasks
   * that finished first). @default { maxBytesPerTask: ARTIFACT_DEFAULTS.maxBytesPerTask (1 GiB), maxBytes: ARTIFACT_DEFAULTS.maxBytes (8 GiB) }
   */
  readonly artifacts?: ArtifactLimits;
}

/**
 * A durable {@link TaskStore} in a SQLite file, on Node's built-in `node:sqlite`: task records, bounded
 * logs (the same byte bound as the in-memory store's), results, usage, run checkpoints, artifacts, each principal's daily spend and the
 * webhook outbox survive a restart, and a crash of the process (WAL, `synchronous=NORMAL`: not a crash of the machine).
 *
 * `appendLog` only buffers: the buffer is written in one transaction per tick, or as soon as
 * `batchEntries` entries wait, and before any other call does its work, so every read sees every append
 * made before it. `saveCheckpoint` writes the checkpoint and the buffered entries in one transaction
 * before it returns. The file is locked for this process until `close()` (or the process's death); the
 * schema is migrated on start.
 *
 * @throws {KlymError} `STORE_UNAVAILABLE`, one line naming the file and why, when the file is not a Klym
 * database, is locked by another Klym process, cannot be opened or created, or was written by a newer
 * Klym; `CONFIG_INVALID` when an option is not usable. Once open, a failing write rejects the call with
 * `STORE_UNAVAILABLE`, and so does any call after `close()` (except `appendLog`, which then ignores the
 * entry: a run being torn down may still log); an artifact past a cap is `ARTIFACT_LIMIT`.
 *
 * @example
 * ```ts
 * import { createSqliteTaskStore } from '@klym/core/sqlite';
 * await using store = await createSqliteTaskStore({ path: '/var/lib/klym/tasks.db' });
 * const manager = createTaskManager({ store, ... });
 * ```
 */
export async function createSqliteTaskStore(options: SqliteTaskStoreOptions): Promise<TaskStore> {
  const { path } = options;
  if (typeof path !== 'string' || path.length === 0) throw invalid('path', 'a non-empty string', path);
  const batchEntries = positiveInteger('batchEntries', options.batchEntries ?? TASK_DEFAULTS.sqliteBatchEntries);
  const maxBytes = positiveInteger('log.maxBytes', options.log?.maxBytes ?? TASK_DEFAULTS.logMaxBytes);
  const maxEntryBytes = positiveInteger('log.maxEntryBytes', options.log?.maxEntryBytes ?? TASK_DEFAULTS.logMaxEntryBytes);
  const artifactLimits = {
    maxBytesPerTask: positiveInteger('artifacts.maxBytesPerTask', options.artifacts?.maxBytesPerTask ?? ARTIFACT_DEFAULTS.maxBytesPerTask),
    maxBytes: positiveInteger('artifacts.maxBytes', options.artifacts?.maxBytes ?? ARTIFACT_DEFAULTS.maxBytes),
  };

  const database = await openTaskDatabase(path);
  const { db } = database;
  const tasks = createTaskTable(db);
  const logs = createLogTable(db, { maxBytes, maxEntryBytes, batchEntries });
  const checkpoints = createCheckpointTable(db);
  const outbox = createOutboxTable(db);
  const artifacts = createArtifactTable(db);
  const spend = createSpendTable(db);
  let closing: Promise<void> | undefined;

  const failed = (error: unknown): KlymError =>
    isKlymError(error)
      ? error
      : new KlymError('STORE_UNAVAILABLE', `The task store ${path} failed: ${error instanceof Error ? error.message : String(error)}`, { cause: error });

  /** Runs `work` once the store is open and what is buffered is written, so it sees every append before it. */
  const use = <T>(work: () => T): T => {
    if (closing !== undefined) throw new KlymError('STORE_UNAVAILABLE', `The task store ${path} is closed`);
    try {
      logs.flush();
      return work();
    } catch (error) {
      throw failed(error);
    }
  };

  const forgetRunIfEnded = (id: string, patch: TaskPatch): void => {
    if (patch.status !== undefined && isTerminal(patch.status)) checkpoints.forget(id);
  };

  const shutdown = async (): Promise<void> => {
    logs.stop();
    const errors: unknown[] = [];
    try {
      logs.flush();
    } catch (error) {
      errors.push(failed(error));
    }
    try {
      // Closing the database folds the WAL into the file, then releases the lock.
      await database.close();
    } catch (error) {
      errors.push(failed(error));
    }
    if (errors.length > 0) throw new AggregateError(errors, `Closing the task store ${path} failed; log entries buffered since the last write may be lost`);
  };

  const close = (): Promise<void> => (closing ??= shutdown());

  return {
    async insert(task) {
      return use(() => tasks.insert(task));
    },
    async get(id) {
      return use(() => tasks.get(id));
    },
    async findByIdempotencyKey(principal, idempotencyKey) {
      return use(() => tasks.findByIdempotencyKey(principal, idempotencyKey));
    },
    async transition(id, from, patch) {
      const task = use(() => tasks.change(id, patch, (status) => from.includes(status)));
      if (task !== undefined) forgetRunIfEnded(id, patch);
      return task;
    },
    async update(id, patch) {
      // Never the status, even when a caller's object carries one.
      const { status: _status, ...rest } = patch as TaskPatch;
      return use(() => tasks.change(id, rest, () => true));
    },
    async addPushTarget(id, target, max) {
      return use(() => tasks.edit(id, (task) => ({ push: withPushTarget(id, task.push, target, max) })));
    },
    async removePushTarget(id, targetId) {
      return use(() => tasks.edit(id, (task) => ({ push: withoutPushTarget(task.push, targetId) })));
    },
    async list(filter = {}, page = {}) {
      return use(() => tasks.list(filter, page));
    },
    async counts() {
      return use(() => tasks.counts());
    },
    async unfinished() {
      return use(() => tasks.unfinished());
    },
    async evict(before) {
      // In chunks, yielding between them: a sweep of many tasks (and their logs) must not hold the loop.
      const evicted: TaskRecord[] = [];
      for (;;) {
        const chunk = use(() => tasks.evict(before, EVICT_CHUNK));
        for (const task of chunk) checkpoints.forget(task.id);
        evicted.push(...chunk);
        if (chunk.length < EVICT_CHUNK) return evicted;
        await new Promise((resolve) => setImmediate(resolve));
      }
    },
    appendLog(id, type, data) {
      if (closing === undefined) logs.append(id, type, data);
    },
    async readLog(id, after, limit) {
      return use(() => logs.read(id, after, limit));
    },
    async tailLog(id, count) {
      return use(() => logs.tail(id, count));
    },
    saveCheckpoint(id, checkpoint) {
      if (closing !== undefined) throw new KlymError('STORE_UNAVAILABLE', `The task store ${path} is closed`);
      try {
        logs.flush(() => checkpoints.write(id, checkpoint));
      } catch (error) {
        throw failed(error);
      }
      checkpoints.remember(id, checkpoint.messages);
    },
    async loadCheckpoint(id) {
      return use(() => checkpoints.read(id));
    },
    async saveArtifact(id, artifact) {
      use(() => artifacts.save(id, artifact, artifactLimits));
    },
    async loadArtifact(id, artifactId) {
      return use(() => artifacts.load(id, artifactId));
    },
    async loadArtifactRange(id, artifactId, start, end) {
      return use(() => artifacts.loadRange(id, artifactId, start, end));
    },
    async listArtifacts(id) {
      return use(() => artifacts.list(id));
    },
    async artifactBytes() {
      return use(() => artifacts.bytes());
    },
    async addSpend(principal, day, spent) {
      return use(() => spend.add(principal, day, spent));
    },
    async spendOf(principal, day) {
      return use(() => spend.of(principal, day));
    },
    async addWebhookMessages(messages) {
      use(() => outbox.add(messages));
    },
    async claimWebhookMessages(now, leaseMs, limit) {
      return use(() => outbox.claim(now, leaseMs, limit));
    },
    async settleWebhookMessage(claim, settlement) {
      return use(() => outbox.settle(claim, settlement));
    },
    async dueOfWebhookMessages(ids) {
      return use(() => outbox.due(ids));
    },
    close,
    [Symbol.asyncDispose]: close,
  };
}

function invalid(name: string, expected: string, value: unknown): KlymError {
  return new KlymError('CONFIG_INVALID', `Expected \`${name}\` to be ${expected}, got ${JSON.stringify(value) ?? String(value)}`);
}
