/**
 * A query process: the only place DuckDB runs. Forked by `query-processes.ts` (loaded by path, never
 * imported), it holds tasks' databases, asks the serving process for an artifact's text a slice at a time as
 * a query names its table, and answers a page of rows, a count, and on request the first rows as JSON lines.
 * It may be killed at any time (past its memory or its time): it keeps nothing that is not in the store.
 */
import { DuckDBInstance, StatementType, type DuckDBConnection, type DuckDBResult, type Json } from '@duckdb/node-api';
import type { FromQueryProcess, ProcessAnswer, ProcessError, QueryLimits, ToQueryProcess } from './query-messages.ts';
import { uniqueNames } from './query-answer.ts';
import { loadArtifact, quoteName, tablesIn, type LineSlice, type TableSource } from './query-tables.ts';
import { toJson } from './query-values.ts';
import { createRecordTypes, type ColumnType } from './record-types.ts';

/** How often an interrupted query is interrupted again until it ends, in milliseconds. */
const INTERRUPT_AGAIN_MS = 100;

/** Databases kept open at once without a query, at most; the least recently used closes first. */
const MAX_IDLE_DATABASES = 4;

interface Database {
  /** Its DuckDB and the one connection its queries run on, set up before the configuration was locked. */
  readonly opened: Promise<{ readonly instance: DuckDBInstance; readonly connection: DuckDBConnection }>;
  /** Its queries run one at a time: the next waits for this. */
  tail: Promise<void>;
  busy: number;
  dropped: boolean;
}

interface Running {
  connection?: DuckDBConnection;
  stopped: boolean;
  repeat?: NodeJS.Timeout;
}

/** V8's collector, exposed to this process (`--expose-gc`). */
const collect = (globalThis as { gc?: () => void }).gc;

const databases = new Map<string, Database>();
const running = new Map<number, Running>();
/** Replies awaited from the serving process, by query id: an artifact's kind, then its slices. */
const awaiting = new Map<number, (message: ToQueryProcess) => void>();

const send = (message: FromQueryProcess): void => {
  process.send?.(message);
};

/**
 * Settings of a task's DuckDB, made on its connection before its first query and locked: no file, no
 * network, no extension that is not built in, no spilling to disk (so a query past `memoryMiB` fails
 * instead). `temp_directory` comes first: DuckDB refuses to change it once external access is off. The
 * streaming buffer is a setting of the connection's own, which is why a database keeps one connection.
 */
const settings = (limits: QueryLimits): readonly string[] => [
  "SET temp_directory = ''",
  `SET memory_limit = '${limits.memoryMiB}MiB'`,
  `SET threads = ${limits.threads}`,
  // A streamed answer is read a chunk at a time: DuckDB need not run ahead of the reader by more than this.
  "SET streaming_buffer_size = '64KiB'",
  'SET allow_community_extensions = false',
  'SET autoinstall_known_extensions = false',
  'SET autoload_known_extensions = false',
  'SET enable_external_access = false',
  'SET lock_configuration = true',
];

async function openInstance(limits: QueryLimits): Promise<{ instance: DuckDBInstance; connection: DuckDBConnection }> {
  const instance = await DuckDBInstance.create(':memory:');
  try {
    const connection = await instance.connect();
    for (const setting of settings(limits)) await connection.run(setting);
    return { instance, connection };
  } catch (error) {
    instance.closeSync();
    throw new QueryError('QUERY_FAILED', `DuckDB could not be set up for the task's queries: ${messageOf(error)}`);
  }
}

const closeDatabase = (database: Database): void =>
  void database.opened
    .then(({ instance, connection }) => {
      connection.closeSync();
      instance.closeSync();
    })
    .catch(() => undefined);

/** The task's database, opened at its first use; idle ones past `MAX_IDLE_DATABASES` close, oldest first. */
function databaseOf(name: string, limits: QueryLimits): Database {
  let database = databases.get(name);
  if (database === undefined) {
    database = { opened: openInstance(limits), tail: Promise.resolve(), busy: 0, dropped: false };
    database.opened.catch(() => databases.delete(name));
  }
  databases.delete(name);
  databases.set(name, database);
  const idle = [...databases].filter(([other, entry]) => other !== name && entry.busy === 0);
  for (const [other] of idle.slice(0, Math.max(0, idle.length - MAX_IDLE_DATABASES))) drop(other);
  return database;
}

function drop(name: string): void {
  const database = databases.get(name);
  if (database === undefined) return;
  databases.delete(name);
  database.dropped = true;
  if (database.busy === 0) closeDatabase(database);
}

class QueryError extends Error {
  readonly code: ProcessError['code'];
  constructor(code: ProcessError['code'], message: string) {
    super(message);
    this.code = code;
  }
}

const messageOf = (error: unknown): string => (error instanceof Error ? error.message : String(error));

/** A reply to query `id` from the serving process. */
function reply(id: number): Promise<ToQueryProcess> {
  return new Promise((resolve) => awaiting.set(id, resolve));
}

/** Loads the tables `ids` names that its database has not; says which the task has, and how long loading took. */
async function ensureTables(
  id: number,
  connection: DuckDBConnection,
  ids: readonly string[],
  check: () => void,
): Promise<{ tables: string[]; loadedMs: number }> {
  if (ids.length === 0) return { tables: [], loadedMs: 0 };
  const catalog = await connection.runAndReadAll("SELECT table_name FROM duckdb_tables() WHERE database_name = current_database() AND schema_name = 'main'");
  const loaded = new Set(catalog.getRows().map((row) => String(row[0])));
  const tables: string[] = [];
  let loadedMs = 0;
  for (const table of ids) {
    if (loaded.has(table)) {
      tables.push(table);
      continue;
    }
    const started = performance.now();
    check();
    send({ type: 'need', id, table });
    const found = await reply(id);
    if (found.type !== 'artifact' || !found.found) continue;
    const source: TableSource = {
      chars: found.chars,
      ...(found.records === undefined ? {} : { records: found.records }),
      ...(found.json === undefined ? {} : { json: found.json }),
    };
    const read = async (from: number): Promise<LineSlice> => {
      check();
      // The slice before is in DuckDB now: collected before the next arrives, the process holds one slice, not
      // every slice of the text until V8 would get round to them.
      if (from > 0) collect?.();
      send({ type: 'next', id, from });
      const slice = await reply(id);
      if (slice.type !== 'slice') throw new QueryError('QUERY_FAILED', `Loading artifact ${table}: its text did not arrive`);
      return { text: slice.text, end: slice.end };
    };
    try {
      await loadArtifact(connection, table, source, read);
    } catch (error) {
      check();
      throw error instanceof QueryError
        ? error
        : new QueryError('QUERY_FAILED', `Loading artifact ${table} as a table failed. DuckDB said: ${messageOf(error)}`);
    } finally {
      send({ type: 'loaded', id });
    }
    tables.push(table);
    loadedMs += performance.now() - started;
  }
  return { tables, loadedMs };
}

/** Runs `sql`'s statements in order and streams the last one's result; refuses to end the query's transaction. */
async function runStatements(connection: DuckDBConnection, sql: string, check: () => void): Promise<DuckDBResult> {
  const statements = await connection.extractStatements(sql).catch((error: unknown) => {
    // A text of comments or semicolons alone has no statement, which the bindings say only this way.
    if (error instanceof Error && error.message === 'Error in native callback')
      throw new QueryError('INVALID_ARGUMENT', 'Expected `sql` to hold a statement, got none');
    throw error;
  });
  for (let at = 0; ; at++) {
    check();
    const prepared = await statements.prepare(at);
    try {
      if (prepared.statementType === StatementType.TRANSACTION) {
        throw new QueryError('QUERY_FAILED', 'BEGIN, COMMIT and ROLLBACK are refused: each query runs in a transaction of its own, rolled back at its end');
      }
      if (at === statements.count - 1) return await prepared.stream();
      await prepared.run();
    } finally {
      prepared.destroySync();
    }
  }
}

/**
 * The result read a chunk at a time: rows converted while the page (and the kept lines) have room, then
 * only counted, up to `maxRows`. Memory is a chunk and a page, whatever the answer's size.
 */
async function readAnswer(
  result: DuckDBResult,
  limits: QueryLimits,
  check: () => void,
): Promise<Pick<ProcessAnswer, 'columns' | 'rows' | 'rowCount' | 'rowCountExact' | 'kept'>> {
  const columns = Array.from({ length: result.columnCount }, (_, at) => ({ name: result.columnName(at), type: result.columnType(at).toString() }));
  const names = uniqueNames(columns);
  const rows: Json[][] = [];
  let pageChars = 0;
  let pageOpen = true;
  const kept: string[] = [];
  let keptChars = 0;
  // The kept rows' types, from their values as kept: the serving process makes their table without parsing them.
  const types = createRecordTypes();
  let keepOpen = limits.keepChars > 0;
  let rowCount = 0;
  for (let chunk = await result.fetchChunk(); chunk !== null && chunk.rowCount > 0; chunk = await result.fetchChunk()) {
    check();
    // A chunk's rows live in DuckDB's memory until its JS wrapper is collected, which V8 cannot see the size
    // of: collected as they are read, a 2.5 GB answer is counted in 250 MiB, not 2.5 GB.
    collect?.();
    if (rowCount + chunk.rowCount > limits.maxRows)
      return { columns, rows, rowCount: limits.maxRows, rowCountExact: false, ...keptOf(kept, names, types.types()) };
    rowCount += chunk.rowCount;
    if (!pageOpen && !keepOpen) continue;
    for (const row of chunk.convertRows(toJson)) {
      if (pageOpen) {
        const chars = JSON.stringify(row).length;
        if (rows.length > 0 && pageChars + chars > limits.pageChars) pageOpen = false;
        else {
          rows.push(row);
          pageChars += chars;
        }
      }
      if (keepOpen) {
        const record = Object.fromEntries(names.map((name, at) => [name, row[at] ?? null]));
        const line = JSON.stringify(record);
        if (keptChars + line.length + 1 > limits.keepChars) keepOpen = false;
        else {
          kept.push(line);
          keptChars += line.length + 1;
          types.add(record);
        }
      }
      if (!pageOpen && !keepOpen) break;
    }
  }
  // Lines are kept only for an answer the page does not hold whole: a page that does is its own table.
  return { columns, rows, rowCount, rowCountExact: true, ...(rows.length < rowCount ? keptOf(kept, names, types.types()) : {}) };
}

const keptOf = (lines: readonly string[], keys: readonly string[], types: { readonly [key: string]: ColumnType } | undefined): Pick<ProcessAnswer, 'kept'> =>
  lines.length === 0 ? {} : { kept: { text: lines.join('\n'), rows: lines.length, keys, ...(types === undefined ? {} : { types }) } };

/** Runs `work` on a connection of database `name` for query `id`, interruptible by an `interrupt` message. */
async function session(
  id: number,
  name: string,
  limits: QueryLimits,
  work: (connection: DuckDBConnection, check: () => void) => Promise<FromQueryProcess>,
): Promise<void> {
  const state: Running = { stopped: false };
  running.set(id, state);
  const database = databaseOf(name, limits);
  database.busy++;
  const previous = database.tail;
  const { promise: turn, resolve: endTurn } = Promise.withResolvers<void>();
  database.tail = turn;
  const check = (): void => {
    if (state.stopped) throw new QueryError('ABORTED', 'The query was interrupted');
  };
  try {
    await previous;
    const { connection } = await database.opened;
    state.connection = connection;
    check();
    // A `USE` of an earlier query's outlives its rollback: each query starts where the tables are.
    await connection.run('USE memory.main');
    send(await work(connection, check));
  } catch (error) {
    const failure: ProcessError = state.stopped
      ? { code: 'ABORTED', message: 'The query was interrupted' }
      : error instanceof QueryError
        ? { code: error.code, message: error.message }
        : { code: 'QUERY_FAILED', message: messageOf(error) };
    send({ type: 'failed', id, error: failure });
  } finally {
    clearInterval(state.repeat);
    // Undoes what the query wrote; refused (and ignored) when no transaction is open.
    await state.connection?.run('ROLLBACK').catch(() => undefined);
    running.delete(id);
    awaiting.delete(id);
    endTurn();
    database.busy--;
    if (database.dropped && database.busy === 0) closeDatabase(database);
  }
}

function interrupt(id: number): void {
  const state = running.get(id);
  if (state === undefined || state.stopped) return;
  state.stopped = true;
  state.connection?.interrupt();
  // DuckDB forgets an interrupt that comes before a statement starts: it is said again until the work ends.
  state.repeat = setInterval(() => state.connection?.interrupt(), INTERRUPT_AGAIN_MS);
  // A query waiting for the serving process (an artifact's slice) stops waiting.
  awaiting.get(id)?.({ type: 'interrupt', id });
}

function onMessage(message: ToQueryProcess): void {
  switch (message.type) {
    case 'query': {
      const { id, database, sql, limits } = message;
      void session(id, database, limits, async (connection, check) => {
        const started = performance.now();
        const { tables, loadedMs } = await ensureTables(id, connection, tablesIn(sql), check);
        check();
        // Rolled back when the session ends, interrupted or not: what the query wrote is undone.
        await connection.run('BEGIN TRANSACTION');
        const result = await runStatements(connection, sql, check);
        const answer = await readAnswer(result, limits, check);
        return { type: 'answer', id, answer: { ...answer, tables, elapsedMs: performance.now() - started, loadedMs } };
      });
      return;
    }
    case 'describe': {
      const { id, database, table, limits } = message;
      void session(id, database, limits, async (connection, check) => {
        const { tables } = await ensureTables(id, connection, [table], check);
        if (tables.length === 0) return { type: 'described', id, columns: [] };
        const described = await connection.runAndReadAll(`DESCRIBE ${quoteName(table)}`);
        return {
          type: 'described',
          id,
          columns: described.getRowObjectsJson().map((row) => ({ name: String(row.column_name), type: String(row.column_type) })),
        };
      });
      return;
    }
    case 'interrupt':
      interrupt(message.id);
      return;
    case 'drop':
      drop(message.database);
      return;
    case 'artifact':
    case 'slice':
      awaiting.get(message.id)?.(message);
      return;
  }
}

process.on('message', onMessage);
// The serving process gone, there is no one to answer: end rather than linger. A serving process killed
// outright (SIGKILL) may not close the channel in a way this process hears: its parent changing says it too.
process.on('disconnect', () => process.exit(0));
const parent = process.ppid;
setInterval(() => process.ppid !== parent && process.exit(0), 500).unref();
send({ type: 'ready' });
