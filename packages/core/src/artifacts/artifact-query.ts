import { MAX_TIMER_MS } from '../defaults.ts';
import { KlymError } from '../errors.ts';
import { openQueryProcessPool, poolOf, type QueryJob, type QueryProcesses } from './query-processes.ts';
import type { QuerySource } from './query-text.ts';
import type { ColumnType } from './record-types.ts';
import { positiveInteger } from '../internal/positive.ts';

export { toCsv, toRecords } from './query-answer.ts';
export { PROCESS_MARGIN_MIB, createQueryProcesses, type QueryProcesses, type QueryProcessesOptions } from './query-processes.ts';

/** Defaults of the query engine ({@link createArtifactQuery}, `createQueryProcesses`), defined once. */
export const QUERY_DEFAULTS = {
  /**
   * Memory a task's DuckDB may use, its loaded tables included, in MiB; nothing spills to disk. Its process is
   * killed past this plus `PROCESS_MARGIN_MIB` (256) as the OS counts it.
   */
  memoryMiB: 512,
  /** Threads one query may use. */
  threads: 2,
  /** A query's time at most, waiting for a process and loading its tables included, in milliseconds. */
  timeoutMs: 30_000,
  /** Rows of an answer counted at most: past it the answer says "more than" this many. */
  maxRows: 1_000_000,
  /** Query processes at most (DuckDB runs in them, never in the serving process). */
  processes: 2,
  /** Queries at once in one query process; the others wait their turn, inside their own `timeoutMs`. */
  maxConcurrent: 1,
  /** Characters of rows (as compact JSON) an answer's page holds at most. */
  pageChars: 65_536,
  /** Characters of JSON lines an answer too big for its page keeps, at most, when asked to (`keep`). */
  keepChars: 8_388_608,
} as const;

/** Options of {@link createArtifactQuery}. */
export interface ArtifactQueryOptions {
  /** The task's artifacts: each is loaded into its table at the first query that names it. */
  readonly source: QuerySource;
  /**
   * The query processes to run in, shared with other tasks (`createQueryProcesses`); their `memoryMiB` and
   * `threads` then apply, not these. @default processes of its own: one, closed with it
   */
  readonly processes?: QueryProcesses;
  /** @default QUERY_DEFAULTS.memoryMiB */
  readonly memoryMiB?: number;
  /** @default QUERY_DEFAULTS.threads */
  readonly threads?: number;
  /** A query's time at most, in milliseconds. @default QUERY_DEFAULTS.timeoutMs */
  readonly timeoutMs?: number;
  /** Rows of an answer counted at most; past it the answer says "more than". @default QUERY_DEFAULTS.maxRows */
  readonly maxRows?: number;
}

/** A query's limits of its own: its caller's signal, a time limit other than the DuckDB's, and its page. */
export interface QueryCallOptions {
  readonly signal?: AbortSignal;
  /** @default the DuckDB's `timeoutMs` */
  readonly timeoutMs?: number;
  /** Characters of rows (as compact JSON) the answer's page holds at most; the first row is always given. @default QUERY_DEFAULTS.pageChars */
  readonly pageChars?: number;
  /** Whether an answer bigger than its page keeps its first rows as JSON lines (`QueryAnswer.kept`), up to `QUERY_DEFAULTS.keepChars`. @default false */
  readonly keep?: boolean;
}

/** What a query answered: its columns, a page of its rows, and how many rows it had in all. */
export interface QueryAnswer {
  /** Its columns, each with DuckDB's name of its type (`BIGINT`, `STRUCT("id" VARCHAR, …)`). */
  readonly columns: readonly QueryColumn[];
  /**
   * Its first rows, as many as the page holds (`pageChars`), of JSON values: NULL as null; integers (BIGINT,
   * HUGEINT…) as numbers, or as strings past `Number.MAX_SAFE_INTEGER`; DECIMAL as numbers; NaN and ±Infinity
   * as strings; dates and times as ISO 8601 strings (`2024-01-02`, `2024-01-02T03:04:05.123`, with `+00` when
   * the type has a time zone); INTERVAL as DuckDB writes it (`1 day 02:00:00`); BLOB as hex; LIST and ARRAY as
   * arrays; STRUCT as objects; MAP as `{ key, value }` pairs; a JSON value as its text, typed VARCHAR (DuckDB's
   * results do not tell JSON from VARCHAR).
   */
  readonly rows: readonly (readonly QueryValue[])[];
  /** Rows of the answer in all, counted up to `maxRows`. */
  readonly rowCount: number;
  /** False when counting stopped at `maxRows`: the answer has more than `rowCount` rows. */
  readonly rowCountExact: boolean;
  /**
   * With `keep`, for an answer its page does not hold whole: its first rows as JSON lines, one object per row
   * keyed by column (a repeated name made unique), up to `QUERY_DEFAULTS.keepChars`; `rows` says how many.
   */
  readonly kept?: {
    readonly text: string;
    readonly rows: number;
    readonly keys: readonly string[];
    /** Each key's type from every kept row's value, as a records artifact's `types`. */
    readonly types?: { readonly [key: string]: ColumnType };
  };
  /** The artifacts the query named, as its tables (loaded by it or before). */
  readonly tables: readonly string[];
  /** The query's time, loading its tables included, in milliseconds. */
  readonly elapsedMs: number;
  /** Of which loading tables it named that were not loaded yet; 0 when it loaded none. */
  readonly loadedMs: number;
}

/** A value of an answer's row, as JSON. */
export type QueryValue = null | boolean | number | string | QueryValue[] | { [key: string]: QueryValue };

/** One column of an answer, with DuckDB's name of its type. */
export interface QueryColumn {
  readonly name: string;
  readonly type: string;
}

/**
 * SQL over one task's artifacts, in a DuckDB of the task's own inside a query process. Each artifact is a
 * table named by its id; see {@link createArtifactQuery}.
 */
export interface ArtifactQuery extends AsyncDisposable {
  /**
   * Runs `sql` (one statement or several; the last one answers) after loading the tables it names.
   * @throws {KlymError} `QUERY_FAILED` quoting DuckDB when it refuses the query or an operation in it, and
   * naming the limit (`timeoutMs`, `memoryMiB`) that stopped it; `ARTIFACT_NOT_FOUND` naming the task's tables
   * for an `art_…` table the task has not; `ABORTED` when `signal` aborts or the DuckDB closes (the query is
   * interrupted); `INVALID_ARGUMENT` for an empty `sql`
   */
  query(sql: string, options?: QueryCallOptions): Promise<QueryAnswer>;
  /**
   * The columns of artifact `id`'s table as DuckDB names their types (`n BIGINT`, `e STRUCT(id VARCHAR,
   * service VARCHAR)`), loading it if needed.
   * @throws {KlymError} as {@link ArtifactQuery.query}
   */
  describe(id: string, options?: QueryCallOptions): Promise<readonly QueryColumn[]>;
  /** Drops the task's tables (and its own processes, if it has them), interrupting a query under way. Idempotent. */
  close(): Promise<void>;
}

let nextDatabase = 0;

/**
 * SQL over a task's artifacts: each artifact is a table named by its id (`art_` and 12 hex digits), loaded
 * at the first query that names it (a text as `n`, `line`; records as `n` and a column per key). DuckDB runs in
 * a query process, never in the calling one: a query past `memoryMiB` or `timeoutMs` takes down that process
 * only, and fails naming the limit. The task's queries run one at a time, each in a transaction rolled back
 * at its end: a query may make scratch tables, or even drop an artifact's, and the next query finds the tables
 * as they were loaded. BEGIN, COMMIT and ROLLBACK are refused for that reason. An answer holds a page of its
 * rows and counts the rest.
 * @example
 * ```ts
 * await using duck = createArtifactQuery({ source: backend });
 * const answer = await duck.query(`SELECT e.service, count(*) FROM ${id} GROUP BY ALL`);
 * const { text } = toCsv(answer, 4_000);
 * ```
 */
export function createArtifactQuery(options: ArtifactQueryOptions): ArtifactQuery {
  const memoryMiB = positiveInteger('memoryMiB', options.memoryMiB ?? QUERY_DEFAULTS.memoryMiB, 'CONFIG_INVALID');
  const threads = positiveInteger('threads', options.threads ?? QUERY_DEFAULTS.threads, 'CONFIG_INVALID');
  const timeoutMs = positiveInteger('timeoutMs', options.timeoutMs ?? QUERY_DEFAULTS.timeoutMs, 'CONFIG_INVALID', MAX_TIMER_MS);
  const maxRows = positiveInteger('maxRows', options.maxRows ?? QUERY_DEFAULTS.maxRows, 'CONFIG_INVALID');
  const { source } = options;
  const own = options.processes === undefined;
  const processes = options.processes === undefined ? openQueryProcessPool({ processes: 1, maxConcurrent: 1, memoryMiB, threads }) : poolOf(options.processes);
  const database = `db-${process.pid}-${nextDatabase++}`;
  let tail: Promise<void> = Promise.resolve();
  let closing: Promise<void> | undefined;
  const running = new Set<AbortController>();

  // One query at a time: a task's queries share its tables, which a first query may be loading.
  const inTurn = async <T>(signal: AbortSignal | undefined, work: () => Promise<T>): Promise<T> => {
    const previous = tail;
    const { promise: done, resolve: finish } = Promise.withResolvers<void>();
    tail = previous.then(() => done);
    try {
      await untilAborted(previous, signal);
      return await work();
    } finally {
      finish();
    }
  };

  const run = (work: QueryJob['work'], call: QueryCallOptions): Promise<QueryAnswer | readonly QueryColumn[]> => {
    if (closing !== undefined) return Promise.reject(closedError());
    const limitMs = call.timeoutMs === undefined ? timeoutMs : positiveInteger('timeoutMs', call.timeoutMs, 'INVALID_ARGUMENT', MAX_TIMER_MS);
    const pageChars = call.pageChars === undefined ? QUERY_DEFAULTS.pageChars : positiveInteger('pageChars', call.pageChars, 'INVALID_ARGUMENT');
    return inTurn(call.signal, async () => {
      if (closing !== undefined) throw closedError();
      const controller = new AbortController();
      running.add(controller);
      try {
        const signal = call.signal === undefined ? controller.signal : AbortSignal.any([call.signal, controller.signal]);
        const done = await processes.run({
          database,
          source,
          work,
          limits: { maxRows, pageChars, keepChars: call.keep === true ? QUERY_DEFAULTS.keepChars : 0 },
          timeoutMs: limitMs,
          signal,
        });
        if (done.type === 'described') return done.columns;
        return done.answer;
      } catch (error) {
        throw controller.signal.aborted && call.signal?.aborted !== true ? closedError() : error;
      } finally {
        running.delete(controller);
      }
    });
  };

  const close = (): Promise<void> => {
    closing ??= (async () => {
      for (const controller of running) controller.abort();
      await tail;
      processes.drop(database);
      if (own) await processes.close();
    })();
    return closing;
  };

  return {
    query(sql, call = {}) {
      if (typeof sql !== 'string' || sql.trim() === '')
        return Promise.reject(new KlymError('INVALID_ARGUMENT', 'Expected `sql` to be a query, got an empty text'));
      return run({ type: 'query', sql }, call) as Promise<QueryAnswer>;
    },
    async describe(id, call = {}) {
      const columns = (await run({ type: 'describe', table: id }, call)) as readonly QueryColumn[];
      if (columns.length > 0) return columns;
      const ids = (await source.list()).map((artifact) => artifact.id);
      const tables = ids.length === 0 ? 'it has none yet' : `its tables are ${ids.join(', ')}`;
      throw new KlymError('ARTIFACT_NOT_FOUND', `This task has no artifact ${id}, so no table of that name: ${tables}`);
    },
    close,
    [Symbol.asyncDispose]: close,
  };
}

const closedError = (): KlymError => new KlymError('ABORTED', "The query was stopped: the task's DuckDB is closed");

const stopped = (): KlymError => new KlymError('ABORTED', 'The query was cancelled');

/** Resolves when `previous` does; rejects at once with ABORTED when `signal` aborts first. */
function untilAborted(previous: Promise<void>, signal: AbortSignal | undefined): Promise<void> {
  if (signal === undefined) return previous;
  if (signal.aborted) return Promise.reject(stopped());
  return new Promise((resolve, reject) => {
    const onAbort = (): void => reject(stopped());
    signal.addEventListener('abort', onAbort, { once: true });
    void previous.then(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    });
  });
}
