import {
  createArtifactQuery,
  QUERY_DEFAULTS,
  type ArtifactQuery,
  type ArtifactQueryOptions,
  type QueryAnswer,
  type QueryCallOptions,
} from '../../artifacts/artifact-query.ts';
import { openQueryProcessPool } from '../../artifacts/query-processes.ts';
import type { ArtifactBackend } from '../../artifacts/artifact-types.ts';
import { KlymError } from '../../errors.ts';

/** Options of {@link createTaskQueries}. */
export interface TaskQueriesOptions extends Omit<ArtifactQueryOptions, 'source' | 'processes'> {
  /** Query processes at most: DuckDB runs in them, never in this process. @default QUERY_DEFAULTS.processes (2) */
  readonly processes?: number;
  /** Queries at once in one query process; the others wait their turn inside their own `timeoutMs`. @default QUERY_DEFAULTS.maxConcurrent (1) */
  readonly maxConcurrent?: number;
  /** How long a task's DuckDB stays open after its last query once no run uses it, in milliseconds. @default 60_000 */
  readonly idleMs?: number;
  /** Tasks' DuckDBs open at once without a run using them, at most; the least recently used closes first. @default 4 */
  readonly maxIdle?: number;
}

/**
 * The DuckDBs of a process's tasks, one per task, in query processes they share: a task's run queries its
 * own (so no task sees another's tables), and a caller's follow-up query on a finished task
 * (`query_task_artifact`) opens it again for a while. A task's tables are dropped with its DuckDB: when its
 * run ends (`release`), after `idleMs` without a query, or past `maxIdle`.
 */
export interface TaskQueries {
  /** Runs `sql` over task `taskId`'s artifacts, read from `backend` as the query names them. */
  query(taskId: string, backend: ArtifactBackend, sql: string, options?: QueryCallOptions): Promise<QueryAnswer>;
  /** Task `taskId`'s run ended: its DuckDB closes now, interrupting a query still under way. */
  release(taskId: string): Promise<void>;
  /** Closes every DuckDB, interrupting queries under way. Idempotent. */
  close(): Promise<void>;
}

interface Entry {
  readonly query: ArtifactQuery;
  /** Queries under way. */
  busy: number;
  timer?: NodeJS.Timeout;
}

/** The DuckDBs of a process's tasks; see {@link TaskQueries}. */
export function createTaskQueries(options: TaskQueriesOptions = {}): TaskQueries {
  const { idleMs = 60_000, maxIdle = 4, processes: count = QUERY_DEFAULTS.processes, maxConcurrent = QUERY_DEFAULTS.maxConcurrent, ...limits } = options;
  const processes = openQueryProcessPool({
    processes: count,
    maxConcurrent,
    memoryMiB: limits.memoryMiB ?? QUERY_DEFAULTS.memoryMiB,
    threads: limits.threads ?? QUERY_DEFAULTS.threads,
  });
  const entries = new Map<string, Entry>();
  let closed: Promise<void> | undefined;

  const closeEntry = async (taskId: string): Promise<void> => {
    const entry = entries.get(taskId);
    if (entry === undefined) return;
    entries.delete(taskId);
    clearTimeout(entry.timer);
    await entry.query.close();
  };
  const idle = (taskId: string, entry: Entry): void => {
    clearTimeout(entry.timer);
    entry.timer = setTimeout(() => void closeEntry(taskId), idleMs);
    entry.timer.unref();
    // The least recently used idle ones go first: Map keeps insertion order, and each use re-inserts.
    const idleOnes = [...entries].filter(([, other]) => other.busy === 0);
    for (const [id] of idleOnes.slice(0, Math.max(0, idleOnes.length - maxIdle))) void closeEntry(id);
  };

  return {
    async query(taskId, backend, sql, queryOptions = {}) {
      if (closed !== undefined) throw new KlymError('SHUTTING_DOWN', 'Klym is shutting down: no more queries');
      let entry = entries.get(taskId);
      if (entry === undefined) entry = { query: createArtifactQuery({ source: backend, processes, ...limits }), busy: 0 };
      entries.delete(taskId);
      entries.set(taskId, entry);
      clearTimeout(entry.timer);
      entry.busy++;
      try {
        return await entry.query.query(sql, queryOptions);
      } finally {
        entry.busy--;
        if (entry.busy === 0 && entries.get(taskId) === entry) idle(taskId, entry);
      }
    },
    release: (taskId) => closeEntry(taskId),
    close() {
      closed ??= Promise.allSettled([...entries.keys()].map(closeEntry)).then(async (results) => {
        await processes.close();
        const failures = results.flatMap((result) => (result.status === 'rejected' ? [result.reason as unknown] : []));
        if (failures.length > 0) throw new AggregateError(failures, 'Some task DuckDBs failed to close');
      });
      return closed;
    },
  };
}
