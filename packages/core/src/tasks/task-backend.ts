import path from 'node:path';
import type { ArtifactLimits } from '../artifacts/artifact-limit.ts';
import { KlymError, isKlymError } from '../errors.ts';
import { createMemoryTaskStore } from './store/memory-task-store.ts';
import type { QueueLogListener } from './queue/queue-log.ts';
import { createInProcessTaskQueue } from './queue/in-process-queue.ts';
import type { TaskQueue } from './queue/task-queue.ts';
import type { BoundedLogOptions } from './store/task-log.ts';
import type { TaskStore } from './store/task-types.ts';

/** Options of {@link openTaskBackend}. */
export interface TaskBackendOptions {
  /** Bounds of each task's log. @default { maxBytes: 262_144, maxEntryBytes: 4_096 } */
  readonly log?: BoundedLogOptions;
  /** Caps on the artifacts the store keeps, per task and in all. @default the store's (see `createSqliteTaskStore`, …) */
  readonly artifacts?: ArtifactLimits;
  /**
   * With a Redis spec, how a dead worker's task is taken over on the shared queue (see
   * `createBullmqTaskQueue`). @default TASK_QUEUE_DEFAULTS
   */
  readonly sharedQueue?: { readonly lockDurationMs?: number; readonly stalledIntervalMs?: number; readonly maxStalledCount?: number };
  /** Receives what a shared queue has to say (Redis lost and reached again, a lock lost); never a password. */
  readonly onQueueLog?: QueueLogListener;
}

/** Where a task manager keeps its tasks and queues them, opened together. */
export interface TaskBackend extends AsyncDisposable {
  readonly store: TaskStore;
  /**
   * Where tasks wait: an in-process queue for `memory` and `sqlite:`, a BullMQ queue in the same Redis for
   * `redis://` (shared by every front and worker on it). The task manager it is given to opens and closes it.
   */
  readonly queue: TaskQueue;
  /** What the store's server settings put at risk (a Redis without append-only file, or with eviction), one line each. */
  readonly warnings: readonly string[];
  /** Closes the queue (if no task manager did) and then the store. Idempotent. @throws {AggregateError} naming what failed to close */
  close(): Promise<void>;
}

/** The store specs {@link openTaskBackend} accepts, as its errors name them. */
const ACCEPTED = '"memory", "sqlite:<path>" or "redis://[user:password@]host:port/db" (rediss:// for TLS)';

/**
 * Opens the task store and queue that `spec` names — the string `tasks.store` takes in Klym's config:
 * `memory` (in this process, lost on exit), `sqlite:<path>` (a file, relative to the working directory; one
 * process at a time), or `redis://…` / `rediss://…` (the Redis store and a BullMQ queue in the same Redis,
 * for many fronts and workers). SQLite and Redis are loaded only when named.
 *
 * @throws {KlymError} `CONFIG_INVALID` for a spec of another scheme, naming it (a URL's password hidden) and
 * what is accepted; `STORE_UNAVAILABLE` naming the file or `host:port/db` when it cannot be opened.
 * @example
 * ```ts
 * await using pool = await createSessionPool({ upstreams })
 * await using backend = await openTaskBackend('sqlite:./data/tasks.db')
 * await using service = createTaskService({ pool, store: backend.store, queue: backend.queue })
 * ```
 */
export async function openTaskBackend(spec: string, options: TaskBackendOptions = {}): Promise<TaskBackend> {
  const storeOptions = {
    ...(options.log === undefined ? {} : { log: options.log }),
    ...(options.artifacts === undefined ? {} : { artifacts: options.artifacts }),
  };
  if (spec === 'memory') return backendOf(createMemoryTaskStore(storeOptions), createInProcessTaskQueue());
  if (spec.startsWith('sqlite:') && spec.length > 'sqlite:'.length) {
    const file = path.resolve(spec.slice('sqlite:'.length));
    try {
      // Loaded only when asked for: a process on the memory store never loads node:sqlite.
      const { createSqliteTaskStore } = await import('./store/sqlite/sqlite-task-store.ts');
      return backendOf(await createSqliteTaskStore({ path: file, ...storeOptions }), createInProcessTaskQueue());
    } catch (error) {
      if (isKlymError(error, 'STORE_UNAVAILABLE')) throw error;
      const reason = error instanceof Error ? error.message : String(error);
      throw new KlymError('STORE_UNAVAILABLE', `Cannot open the task store ${file}: ${reason}`, { cause: error });
    }
  }
  if (/^rediss?:\/\//.test(spec)) {
    // Loaded only when asked for; their errors name host:port/db, never the password.
    const [{ createRedisTaskStore }, { createBullmqTaskQueue }] = await Promise.all([
      import('./store/redis/redis-task-store.ts'),
      import('./queue/bullmq-task-queue.ts'),
    ]);
    const store = await createRedisTaskStore({ url: spec, ...storeOptions });
    try {
      const queue = await createBullmqTaskQueue({
        url: spec,
        ...options.sharedQueue,
        ...(options.onQueueLog === undefined ? {} : { onLog: options.onQueueLog }),
      });
      return backendOf(store, queue, store.warnings);
    } catch (error) {
      await store.close().catch(() => {});
      throw error;
    }
  }
  throw new KlymError('CONFIG_INVALID', `Expected the task store to be ${ACCEPTED}, got "${shown(spec)}"`);
}

/** `spec` as an error may quote it: at most 200 characters, a URL's password replaced. */
function shown(spec: string): string {
  return spec.replace(/^([a-z][a-z0-9+.-]*:\/\/[^:/@]*:)[^@/]*@/i, '$1***@').slice(0, 200);
}

function backendOf(store: TaskStore, queue: TaskQueue, warnings: readonly string[] = []): TaskBackend {
  let closing: Promise<void> | undefined;
  const backend: TaskBackend = {
    store,
    queue,
    warnings,
    close() {
      closing ??= (async () => {
        const failures: unknown[] = [];
        // A task manager closed the queue already (the close is memoised); one never given to a manager is closed here.
        await queue.close({ graceMs: 0 }).catch((error: unknown) => void failures.push(error));
        await store.close().catch((error: unknown) => void failures.push(error));
        if (failures.length > 0) throw new AggregateError(failures, 'The task backend could not close everything it opened');
      })();
      return closing;
    },
    [Symbol.asyncDispose]: () => backend.close(),
  };
  return backend;
}
