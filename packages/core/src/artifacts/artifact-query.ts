import { DuckDBInstance, StatementType, type DuckDBConnection, type DuckDBResult, type Json } from '@duckdb/node-api';
import { MAX_TIMER_MS } from '../defaults.ts';
import { KlymError } from '../errors.ts';
import type { ArtifactInfo, StoredArtifact } from './artifact-types.ts';
import { toJson } from './query-answer.ts';
import { loadArtifact, quoteName, tablesIn } from './query-tables.ts';

export { toCsv, toRecords } from './query-answer.ts';

/** Defaults of a task's DuckDB ({@link createArtifactQuery}), defined once. */
export const QUERY_DEFAULTS = {
  /** Memory the task's DuckDB may use, its loaded tables included, in MiB; nothing spills to disk. */
  memoryMiB: 512,
  /** Threads one query may use. */
  threads: 2,
  /** A query's time at most, the loading of its tables included, in milliseconds. */
  timeoutMs: 30_000,
  /** Rows one answer may have at most: past it the query fails, rather than read them all. */
  maxRows: 1_000_000,
} as const;

/** Options of {@link createArtifactQuery}. */
export interface ArtifactQueryOptions {
  /** The task's artifacts: each is loaded into its table at the first query that names it. */
  readonly source: { load(id: string): Promise<StoredArtifact | undefined>; list(): Promise<readonly ArtifactInfo[]> };
  /** @default QUERY_DEFAULTS.memoryMiB */
  readonly memoryMiB?: number;
  /** @default QUERY_DEFAULTS.threads */
  readonly threads?: number;
  /** A query's time at most, in milliseconds. @default QUERY_DEFAULTS.timeoutMs */
  readonly timeoutMs?: number;
  /** Rows an answer may have at most; more fails the query naming the limit. @default QUERY_DEFAULTS.maxRows */
  readonly maxRows?: number;
}

/** A query's limits of its own: its caller's signal, and a time limit other than the DuckDB's. */
export interface QueryCallOptions {
  readonly signal?: AbortSignal;
  /** @default the DuckDB's `timeoutMs` */
  readonly timeoutMs?: number;
}

/** What a query answered. */
export interface QueryAnswer {
  /** Its columns, each with DuckDB's name of its type (`BIGINT`, `STRUCT("id" VARCHAR, …)`). */
  readonly columns: readonly { readonly name: string; readonly type: string }[];
  /**
   * Its rows, of JSON values: NULL as null; integers (BIGINT, HUGEINT…) as numbers, or as strings past
   * `Number.MAX_SAFE_INTEGER`; DECIMAL as numbers; NaN and ±Infinity as strings; dates and times as ISO 8601
   * strings (`2024-01-02`, `2024-01-02T03:04:05.123`, with `+00` when the type has a time zone); INTERVAL as
   * DuckDB writes it (`1 day 02:00:00`); BLOB as hex; LIST and ARRAY as arrays; STRUCT as objects; MAP as
   * `{ key, value }` pairs; a JSON value as its text, typed VARCHAR (DuckDB's results do not tell JSON from VARCHAR).
   */
  readonly rows: readonly (readonly Json[])[];
  /** The artifacts the query named, as its tables (loaded by it or before). */
  readonly tables: readonly string[];
  /** The query's time, loading its tables included, in milliseconds. */
  readonly elapsedMs: number;
  /** Of which loading tables it named that were not loaded yet; 0 when it loaded none. */
  readonly loadedMs: number;
}

/**
 * SQL over one task's artifacts, in a DuckDB of the task's own. Each artifact is a table named by its id; see
 * {@link createArtifactQuery}.
 */
export interface ArtifactQuery extends AsyncDisposable {
  /**
   * Runs `sql` (one statement or several; the last one answers) after loading the tables it names.
   * @throws {KlymError} `QUERY_FAILED` quoting DuckDB when it refuses the query or an operation in it, and
   * naming the limit (`timeoutMs`, `memoryMiB`, `maxRows`) that stopped it; `ARTIFACT_NOT_FOUND` naming the
   * task's tables for an `art_…` table the task has not; `ABORTED` when `signal` aborts or the DuckDB closes
   * (the query is interrupted); `INVALID_ARGUMENT` for an empty `sql`
   */
  query(sql: string, options?: QueryCallOptions): Promise<QueryAnswer>;
  /**
   * The columns of artifact `id`'s table as DuckDB names their types (`n BIGINT`, `e STRUCT(id VARCHAR,
   * service VARCHAR)`), loading it if needed.
   * @throws {KlymError} as {@link ArtifactQuery.query}
   */
  describe(id: string, options?: QueryCallOptions): Promise<readonly { readonly name: string; readonly type: string }[]>;
  /** Closes the DuckDB, its tables with it, interrupting a query under way. Idempotent. */
  close(): Promise<void>;
}

/**
 * Settings of a task's DuckDB, made before its first query and locked: no file, no network, no extension
 * that is not built in, no spilling to disk (so a query past `memoryMiB` fails instead). `temp_directory`
 * comes first: DuckDB refuses to change it once external access is off.
 */
const settings = (memoryMiB: number, threads: number): readonly string[] => [
  "SET temp_directory = ''",
  `SET memory_limit = '${memoryMiB}MiB'`,
  `SET threads = ${threads}`,
  'SET allow_community_extensions = false',
  'SET autoinstall_known_extensions = false',
  'SET autoload_known_extensions = false',
  'SET enable_external_access = false',
  'SET lock_configuration = true',
];

/** DuckDB's error for a table that is not there, naming an artifact's. */
const MISSING_TABLE = /^Catalog Error: Table with name (art_[0-9a-f]{12}) does not exist/i;

/** How often an interrupted query is interrupted again until it ends, in milliseconds. */
const INTERRUPT_AGAIN_MS = 100;

/** Why a query was interrupted. */
type Stop = 'signal' | 'timeout' | 'close';

/**
 * A DuckDB in memory for one task's artifacts: each artifact is a table named by its id (`art_` and 12 hex
 * digits), loaded at the first query that names it (`loadArtifact`: a text as `n`, `line`; records as `n`
 * and a column per key). The DuckDB itself opens at the first query, so a task that never queries costs
 * nothing. Queries run one at a time, each on a connection of its own inside a transaction that is rolled
 * back at its end: a query may make scratch tables, or even drop an artifact's, and the next query finds
 * the tables as they were loaded, nor does a `USE` or `SET search_path` outlive it. BEGIN, COMMIT and
 * ROLLBACK are refused for that reason.
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
  let database: Promise<DuckDBInstance> | undefined;
  let tail: Promise<void> = Promise.resolve();
  let running: ((reason: Stop) => void) | undefined;
  let closing: Promise<void> | undefined;

  const open = (): Promise<DuckDBInstance> => {
    database ??= openDatabase(memoryMiB, threads).catch((error: unknown) => {
      database = undefined;
      throw error;
    });
    return database;
  };

  // One query at a time: they share the task's memory, and a second would only wait inside DuckDB.
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

  const session = <T>(call: QueryCallOptions, work: (connection: DuckDBConnection, check: () => void) => Promise<T>): Promise<T> => {
    if (closing !== undefined) return Promise.reject(stopped('close', 0));
    const limitMs = call.timeoutMs === undefined ? timeoutMs : positiveInteger('timeoutMs', call.timeoutMs, 'INVALID_ARGUMENT', MAX_TIMER_MS);
    return inTurn(call.signal, async () => {
      if (closing !== undefined) throw stopped('close', 0);
      const connection = await (await open()).connect();
      let stop: Stop | undefined;
      let repeat: NodeJS.Timeout | undefined;
      const interrupt = (reason: Stop): void => {
        if (stop !== undefined) return;
        stop = reason;
        connection.interrupt();
        // DuckDB forgets an interrupt that comes before a statement starts: it is said again until the work ends.
        repeat = setInterval(() => connection.interrupt(), INTERRUPT_AGAIN_MS);
      };
      const onAbort = (): void => interrupt('signal');
      call.signal?.addEventListener('abort', onAbort, { once: true });
      if (call.signal?.aborted === true) interrupt('signal');
      if (closing !== undefined) interrupt('close');
      const timer = setTimeout(() => interrupt('timeout'), limitMs);
      running = interrupt;
      // Nor is a statement started once an interrupt came: each step looks for one first.
      const check = (): void => {
        if (stop !== undefined) throw stopped(stop, limitMs);
      };
      try {
        return await work(connection, check);
      } catch (error) {
        throw stop === undefined ? failed(error, memoryMiB) : stopped(stop, limitMs);
      } finally {
        clearTimeout(timer);
        clearInterval(repeat);
        call.signal?.removeEventListener('abort', onAbort);
        running = undefined;
        connection.closeSync();
      }
    });
  };

  /**
   * Loads the tables of `ids` that are not loaded, as the catalog says (not a set of ours: a table that is
   * not there is loaded again). Says which of `ids` the task has, and how long loading took (0 when nothing
   * was loaded); an id the task has not is left for DuckDB to miss, as it may be a string's.
   */
  const ensureTables = async (
    connection: DuckDBConnection,
    ids: readonly string[],
    check: () => void,
  ): Promise<{ readonly tables: string[]; readonly loadedMs: number }> => {
    if (ids.length === 0) return { tables: [], loadedMs: 0 };
    const catalog = await connection.runAndReadAll("SELECT table_name FROM duckdb_tables() WHERE database_name = current_database() AND schema_name = 'main'");
    const loaded = new Set(catalog.getRows().map((row) => String(row[0])));
    const tables: string[] = [];
    let loadedMs = 0;
    for (const id of ids) {
      if (loaded.has(id)) {
        tables.push(id);
        continue;
      }
      const started = performance.now();
      check();
      const artifact = await source.load(id);
      if (artifact === undefined) continue;
      check();
      try {
        await loadArtifact(connection, artifact);
      } catch (error) {
        check();
        throw failed(error, memoryMiB, `Loading artifact ${id} as a table`);
      }
      tables.push(id);
      loadedMs += performance.now() - started;
    }
    return { tables, loadedMs };
  };

  const notFound = async (id: string): Promise<KlymError> => {
    const ids = (await source.list()).map((artifact) => artifact.id);
    const tables = ids.length === 0 ? 'it has none yet' : `its tables are ${ids.join(', ')}`;
    return new KlymError('ARTIFACT_NOT_FOUND', `This task has no artifact ${id}, so no table of that name: ${tables}`);
  };

  const close = (): Promise<void> => {
    closing ??= (async () => {
      running?.('close');
      await tail;
      const opened = database;
      database = undefined;
      const instance = await opened?.catch(() => undefined);
      instance?.closeSync();
    })();
    return closing;
  };

  return {
    query(sql, call = {}) {
      if (typeof sql !== 'string' || sql.trim() === '')
        return Promise.reject(new KlymError('INVALID_ARGUMENT', 'Expected `sql` to be a query, got an empty text'));
      return session(call, async (connection, check) => {
        const started = performance.now();
        const { tables, loadedMs } = await ensureTables(connection, tablesIn(sql), check);
        check();
        await connection.run('BEGIN TRANSACTION');
        try {
          const result = await runStatements(connection, sql, check);
          const { columns, rows } = await readAnswer(result, maxRows, check);
          return { columns, rows, tables, elapsedMs: performance.now() - started, loadedMs };
        } catch (error) {
          const missing = error instanceof Error && !(error instanceof KlymError) ? MISSING_TABLE.exec(error.message)?.[1]?.toLowerCase() : undefined;
          throw missing === undefined || tables.includes(missing) ? error : await notFound(missing);
        } finally {
          // Undoes what the query wrote. Should it fail (an interrupted transaction), the connection's close undoes it too.
          await connection.run('ROLLBACK').catch(() => undefined);
        }
      });
    },
    describe(id, call = {}) {
      return session(call, async (connection, check) => {
        if ((await ensureTables(connection, [id], check)).tables.length === 0) throw await notFound(id);
        const described = await connection.runAndReadAll(`DESCRIBE ${quoteName(id)}`);
        return described.getRowObjectsJson().map((row) => ({ name: String(row.column_name), type: String(row.column_type) }));
      });
    },
    close,
    [Symbol.asyncDispose]: close,
  };
}

async function openDatabase(memoryMiB: number, threads: number): Promise<DuckDBInstance> {
  const instance = await DuckDBInstance.create(':memory:');
  try {
    const connection = await instance.connect();
    try {
      for (const setting of settings(memoryMiB, threads)) await connection.run(setting);
    } finally {
      connection.closeSync();
    }
  } catch (error) {
    instance.closeSync();
    throw new KlymError('QUERY_FAILED', `DuckDB could not be set up for the task's queries: ${error instanceof Error ? error.message : String(error)}`, {
      cause: error,
    });
  }
  return instance;
}

/** Runs `sql`'s statements in order and streams the last one's result; refuses to end the query's transaction. */
async function runStatements(connection: DuckDBConnection, sql: string, check: () => void): Promise<DuckDBResult> {
  const statements = await connection.extractStatements(sql).catch((error: unknown) => {
    // A text of comments or semicolons alone has no statement, which the bindings say only this way.
    if (error instanceof Error && error.message === 'Error in native callback')
      throw new KlymError('INVALID_ARGUMENT', 'Expected `sql` to hold a statement, got none');
    throw error;
  });
  for (let at = 0; ; at++) {
    check();
    const prepared = await statements.prepare(at);
    try {
      if (prepared.statementType === StatementType.TRANSACTION) {
        throw new KlymError('QUERY_FAILED', 'BEGIN, COMMIT and ROLLBACK are refused: each query runs in a transaction of its own, rolled back at its end');
      }
      if (at === statements.count - 1) return await prepared.stream();
      await prepared.run();
    } finally {
      prepared.destroySync();
    }
  }
}

/** The result's columns and rows, read a chunk at a time; fails once there are more than `maxRows`. */
async function readAnswer(result: DuckDBResult, maxRows: number, check: () => void): Promise<Pick<QueryAnswer, 'columns' | 'rows'>> {
  const columns = Array.from({ length: result.columnCount }, (_, at) => ({ name: result.columnName(at), type: result.columnType(at).toString() }));
  const rows: Json[][] = [];
  for (let chunk = await result.fetchChunk(); chunk !== null && chunk.rowCount > 0; chunk = await result.fetchChunk()) {
    check();
    if (rows.length + chunk.rowCount > maxRows) {
      throw new KlymError(
        'QUERY_FAILED',
        `The answer has more than ${maxRows.toLocaleString('en-US')} rows, the most a query may give (\`maxRows\`): aggregate it (GROUP BY, count, sum) or add a LIMIT`,
      );
    }
    for (const row of chunk.convertRows(toJson)) rows.push(row);
  }
  return { columns, rows };
}

const stopped = (reason: Stop, timeoutMs: number): KlymError =>
  reason === 'signal'
    ? new KlymError('ABORTED', 'The query was cancelled')
    : reason === 'close'
      ? new KlymError('ABORTED', "The query was stopped: the task's DuckDB is closed")
      : new KlymError(
          'QUERY_FAILED',
          `The query ran past its time limit of ${timeoutMs.toLocaleString('en-US')} ms (\`timeoutMs\`) and was stopped: filter or aggregate sooner, or query less at once`,
        );

/** `error` as a KlymError: DuckDB's message quoted, an out-of-memory one with the limit it hit. */
function failed(error: unknown, memoryMiB: number, what = 'The query'): KlymError {
  if (error instanceof KlymError) return error;
  const message = error instanceof Error ? error.message : String(error);
  if (message.startsWith('Out of Memory Error')) {
    // DuckDB's advice after its first paragraph is to SET a higher limit, which is locked here.
    const said = message.split('\n\n')[0];
    return new KlymError(
      'QUERY_FAILED',
      `${what} needed more memory than the task's DuckDB may use, ${memoryMiB} MiB (\`memoryMiB\`, loaded tables included): filter or aggregate sooner, select fewer columns. DuckDB said: ${said}`,
      { cause: error },
    );
  }
  return new KlymError('QUERY_FAILED', `${what} failed. DuckDB said: ${message}`, { cause: error });
}

function positiveInteger(name: string, value: number, code: 'CONFIG_INVALID' | 'INVALID_ARGUMENT', max = Number.MAX_SAFE_INTEGER): number {
  if (!Number.isSafeInteger(value) || value <= 0 || value > max) {
    throw new KlymError(
      code,
      `Expected \`${name}\` to be a positive integer${max === Number.MAX_SAFE_INTEGER ? '' : ` of at most ${max}`}, got ${String(value)}`,
    );
  }
  return value;
}

/** Resolves when `previous` does; rejects at once with ABORTED when `signal` aborts first. */
function untilAborted(previous: Promise<void>, signal: AbortSignal | undefined): Promise<void> {
  if (signal === undefined) return previous;
  if (signal.aborted) return Promise.reject(stopped('signal', 0));
  return new Promise((resolve, reject) => {
    const onAbort = (): void => reject(stopped('signal', 0));
    signal.addEventListener('abort', onAbort, { once: true });
    void previous.then(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    });
  });
}
