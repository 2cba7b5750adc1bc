import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { countLines } from './artifact-text.ts';
import { recordsOf } from './artifact-records.ts';
import { createMemoryArtifacts } from './artifact-store.ts';
import type { ArtifactBackend, StoredArtifact } from './artifact-types.ts';
import { createArtifactQuery, toCsv, toRecords, type QueryAnswer } from './artifact-query.ts';

const SERVICES = ['api', 'auth', 'billing', 'search', 'mail', 'queue', 'cache'];

let next = 0;
/** An artifact as a store keeps it: `text` as it is, or laid out as records by `recordsOf`. */
function artifact(text: string, as: 'text' | 'records' = 'text'): StoredArtifact {
  const id = `art_${(0xa00000000000 + next++).toString(16)}`;
  const base = { id, tool: 'grynya__query_graph', tokens: 0, createdAt: new Date(0).toISOString() };
  if (as === 'text') return { ...base, text, bytes: Buffer.byteLength(text), lines: countLines(text) };
  const layout = recordsOf(text);
  if (layout === undefined) throw new Error('not records');
  return { ...base, text: layout.text, bytes: Buffer.byteLength(layout.text), lines: countLines(layout.text), records: layout.records, original: text };
}

async function backendOf(...artifacts: StoredArtifact[]): Promise<ArtifactBackend> {
  const backend = createMemoryArtifacts();
  for (const kept of artifacts) await backend.save(kept);
  return backend;
}

/** A log of `lines` lines, CRLF on odd lines, `ERROR` on every 7th, its service named `svc=…`. */
function log(lines: number): string {
  const out: string[] = [];
  for (let n = 0; n < lines; n++) {
    const level = n % 7 === 0 ? 'ERROR' : 'INFO';
    out.push(
      `2026-11-25T03:14:${String(n % 60).padStart(2, '0')}Z svc=${SERVICES[(n * 3) % SERVICES.length]} ${level} #${n} ${n % 900}ms${n % 2 === 1 ? '\r' : ''}`,
    );
  }
  return `${out.join('\n')}\n`;
}

/** A graph answer as grynya gives it: `{"status":"success","results":[{"e":{…}}, …]}`, each row with a key `n` too. */
function graph(rows: number): { text: string; results: { e: { id: string; service: string; severity: string; latency_ms: number }; n: number }[] } {
  const results = Array.from({ length: rows }, (_, n) => ({
    e: { id: `ev-${n}`, service: SERVICES[(n * n) % SERVICES.length] as string, severity: n % 10 === 0 ? 'error' : 'info', latency_ms: (n * 37) % 1000 },
    n: rows - n,
  }));
  return { text: JSON.stringify({ status: 'success', results }), results };
}

const countBy = <T>(items: readonly T[], key: (item: T) => string): Record<string, number> => {
  const counts: Record<string, number> = {};
  for (const item of items) counts[key(item)] = (counts[key(item)] ?? 0) + 1;
  return counts;
};
const asCounts = (answer: QueryAnswer): Record<string, number> => Object.fromEntries(answer.rows.map(([key, count]) => [String(key), count as number]));

/** Parses CSV as RFC 4180 reads it, an unquoted empty field as null. */
function parseCsv(text: string): (string | null)[][] {
  const rows: (string | null)[][] = [];
  let row: (string | null)[] = [];
  let at = 0;
  for (;;) {
    let field: string | null;
    if (text[at] === '"') {
      let value = '';
      for (at++; ; at++) {
        if (text[at] === '"' && text[at + 1] === '"') {
          value += '"';
          at++;
        } else if (text[at] === '"') break;
        else value += text[at];
      }
      at++;
      field = value;
    } else {
      const end = text.slice(at).search(/[,\n]|$/) + at;
      field = end === at ? null : text.slice(at, end);
      at = end;
    }
    row.push(field);
    if (text[at] === ',') at++;
    else {
      rows.push(row);
      row = [];
      if (at >= text.length) return rows;
      at++;
    }
  }
}

const LONG_QUERY = 'SELECT count(*) FROM range(1000000000000) t(i) WHERE i % 7 = 3';

describe('createArtifactQuery', () => {
  it('makes a text artifact a table of n and line: counts and line numbers as the text has them', async () => {
    const text = log(5_000);
    const kept = artifact(text);
    await using duck = createArtifactQuery({ source: await backendOf(kept) });
    const lines = text
      .split('\n')
      .slice(0, -1)
      .map((line) => line.replace(/\r$/, ''));
    const errors = countBy(
      lines.filter((line) => line.includes(' ERROR ')),
      (line) => /svc=(\w+)/.exec(line)?.[1] as string,
    );
    const answer = await duck.query(
      `SELECT regexp_extract(line, 'svc=(\\w+)', 1) AS service, count(*) FROM ${kept.id} WHERE line LIKE '% ERROR %' GROUP BY ALL`,
    );
    expect(asCounts(answer)).toEqual(errors);
    expect(answer.tables).toEqual([kept.id]);
    expect(answer.columns).toEqual([
      { name: 'service', type: 'VARCHAR' },
      { name: 'count_star()', type: 'BIGINT' },
    ]);

    const some = await duck.query(`SELECT n, line FROM ${kept.id.toUpperCase()} WHERE n IN (0, 1, 2_345, 4_999) ORDER BY n`);
    expect(some.rows).toEqual([0, 1, 2_345, 4_999].map((n) => [n, lines[n]]));
    // A last newline ends the last line and starts none; a CR before a newline is not the line's.
    const total = await duck.query(`SELECT count(*), count(*) FILTER (WHERE line LIKE '%' || chr(13)) FROM ${kept.id}`);
    expect(total.rows).toEqual([[5_000, 0]]);
    expect(await duck.describe(kept.id)).toEqual([
      { name: 'n', type: 'BIGINT' },
      { name: 'line', type: 'VARCHAR' },
    ]);
  });

  it('numbers every line of a text loaded in slices, a line longer than a slice whole among short ones', async () => {
    // 12 MB: three slices of whole lines, and a 5 MB line that is a slice of its own.
    const lines = Array.from({ length: 200_000 }, (_, n) => `line ${n} ${'x'.repeat(n % 90)}\r`);
    lines.splice(123_456, 0, `the long one ${'y'.repeat(5_000_000)}`);
    const kept = artifact(`${lines.join('\n')}\n`);
    await using duck = createArtifactQuery({ source: await backendOf(kept) });
    const check = await duck.query(
      `SELECT count(*), max(n), count(*) FILTER (WHERE line <> 'line ' || (CASE WHEN n > 123456 THEN n - 1 ELSE n END) || ' ' || repeat('x', ((CASE WHEN n > 123456 THEN n - 1 ELSE n END) % 90)::INTEGER) AND n <> 123456), max(length(line)) FROM ${kept.id}`,
    );
    expect(check.rows).toEqual([[200_001, 200_000, 0, 5_000_013]]);
  });

  it('makes a records artifact a table of n and one column per key, nested objects as STRUCTs: exact counts, n as the artifact numbers its lines', async () => {
    const { text, results } = graph(20_000);
    const kept = artifact(text, 'records');
    expect(kept.records).toMatchObject({ firstLine: 1, count: 20_000 });
    await using duck = createArtifactQuery({ source: await backendOf(kept) });

    const perService = await duck.query(`SELECT e.service, count(*) FROM ${kept.id} GROUP BY ALL`);
    expect(asCounts(perService)).toEqual(countBy(results, (row) => row.e.service));
    const errors = await duck.query(`SELECT e.service, count(*), sum(e.latency_ms) FROM ${kept.id} WHERE e.severity = 'error' GROUP BY ALL ORDER BY 1`);
    const expected = countBy(
      results.filter((row) => row.e.severity === 'error'),
      (row) => row.e.service,
    );
    expect(errors.rows.map(([service, count]) => [service, count])).toEqual(Object.entries(expected).toSorted(([a], [b]) => a.localeCompare(b)));
    expect(errors.rows.reduce((sum, row) => sum + (row[2] as number), 0)).toBe(
      results.filter((row) => row.e.severity === 'error').reduce((sum, row) => sum + row.e.latency_ms, 0),
    );

    // Line 0 is the envelope; record k is line k + 1, as klym__read_artifact and grep number it. The records' own `n` is `n_1`.
    const lines = kept.text.split('\n');
    const picked = await duck.query(`SELECT n, n_1, e.id FROM ${kept.id} WHERE e.id IN ('ev-0', 'ev-12345') ORDER BY n`);
    expect(picked.rows).toEqual([
      [1, 20_000, 'ev-0'],
      [12_346, 20_000 - 12_345, 'ev-12345'],
    ]);
    expect(JSON.parse(lines[12_346] as string)).toEqual(results[12_345]);
    expect((await duck.query(`SELECT min(n), max(n), count(*) FROM ${kept.id}`)).rows).toEqual([[1, 20_000, 20_000]]);

    expect(await duck.describe(kept.id)).toEqual([
      { name: 'n', type: 'BIGINT' },
      { name: 'e', type: 'STRUCT(id VARCHAR, service VARCHAR, severity VARCHAR, latency_ms BIGINT)' },
      { name: 'n_1', type: 'BIGINT' },
    ]);
  });

  it('names a column for every key: quoted where it is no identifier, `n` and keys that differ only in case renamed, a key only ever null as JSON', async () => {
    const rows = [
      { n: 7, 'my key': 'a,b', A: 1, a: 2, 'say "hi"': true, '': 'empty', always: null, nested: { 'x y': [1, 2] } },
      { n: 8, 'my key': 'c', A: 3, a: 4, 'say "hi"': false, '': 'e', always: null, nested: { 'x y': [] } },
    ];
    const kept = artifact(JSON.stringify(rows), 'records');
    expect(kept.records?.firstLine).toBe(0);
    await using duck = createArtifactQuery({ source: await backendOf(kept) });
    const columns = await duck.describe(kept.id);
    expect(columns.map((column) => column.name)).toEqual(['n', 'n_1', 'my key', 'A', 'a_1', 'say "hi"', '_', 'always', 'nested']);
    expect(columns.find((column) => column.name === 'always')?.type).toBe('JSON');
    const answer = await duck.query(`SELECT n, n_1, "my key", a_1, "say ""hi""", nested."x y" FROM ${kept.id} ORDER BY n`);
    expect(answer.rows).toEqual([
      [0, 7, 'a,b', 2, true, [1, 2]],
      [1, 8, 'c', 4, false, []],
    ]);
  });

  it('loads a table at the first query that names it, and each task sees only its own', async () => {
    const mine = artifact(log(100));
    const theirs = artifact(log(50));
    await using duck = createArtifactQuery({ source: await backendOf(mine) });
    await using other = createArtifactQuery({ source: await backendOf(theirs) });
    expect((await other.query(`SELECT count(*) FROM ${theirs.id}`)).rows).toEqual([[50]]);

    const first = await duck.query(`SELECT count(*) FROM ${mine.id}`);
    expect(first.loadedMs).toBeGreaterThan(0);
    expect((await duck.query(`SELECT count(*) FROM ${mine.id}`)).loadedMs).toBe(0);
    await expect(duck.query(`SELECT count(*) FROM ${theirs.id}`)).rejects.toMatchObject({
      code: 'ARTIFACT_NOT_FOUND',
      message: `This task has no artifact ${theirs.id}, so no table of that name: its tables are ${mine.id}`,
    });
    // An id in a string is no table: only a table DuckDB misses is an artifact not found.
    expect((await duck.query(`SELECT count(*) FROM ${mine.id} WHERE line LIKE '%${theirs.id}%'`)).rows).toEqual([[0]]);
    // Not by the source alone: the other DuckDB's catalog does not hold the table either.
    expect((await duck.query('SELECT table_name FROM duckdb_tables()')).rows).toEqual([[mine.id]]);
    await using empty = createArtifactQuery({ source: await backendOf() });
    await expect(empty.describe(mine.id)).rejects.toMatchObject({ code: 'ARTIFACT_NOT_FOUND', message: expect.stringContaining('it has none yet') });
  });

  it('refuses files, network, extensions and settings with DuckDB’s own message, and answers the next query', async () => {
    const kept = artifact(log(10));
    await using duck = createArtifactQuery({ source: await backendOf(kept), memoryMiB: 128 });
    const written = join(tmpdir(), `klym-query-${process.pid}.csv`);
    const refused: [string, string][] = [
      ["SELECT * FROM read_csv('/etc/passwd')", 'file system operations are disabled by configuration'],
      ["SELECT * FROM read_text('/etc/hostname')", 'file system operations are disabled by configuration'],
      ['INSTALL httpfs', 'disabled by configuration'],
      [`COPY ${kept.id} TO '${written}'`, 'file system operations are disabled by configuration'],
      [`ATTACH '${join(tmpdir(), 'klym-query.db')}' AS other`, 'file system operations are disabled by configuration'],
      ['SET enable_external_access = true', 'the configuration has been locked'],
      ["SET memory_limit = '10GB'", 'the configuration has been locked'],
      ['SET threads = 64', 'the configuration has been locked'],
      ['RESET lock_configuration', 'the configuration has been locked'],
    ];
    for (const [sql, said] of refused) {
      const error = await duck.query(sql).catch((caught: unknown) => caught);
      expect({ sql, error }).toMatchObject({ sql, error: { code: 'QUERY_FAILED', message: expect.stringContaining(said) } });
    }
    expect(existsSync(written)).toBe(false);
    // No temporary directory: past its memory a query fails rather than write to disk.
    const settings = await duck.query(
      "SELECT current_setting('memory_limit'), current_setting('threads'), current_setting('enable_external_access'), current_setting('temp_directory')",
    );
    expect(settings.rows).toEqual([['128.0 MiB', 2, false, '']]);
    expect((await duck.query(`SELECT count(*) FROM ${kept.id}`)).rows).toEqual([[10]]);
  });

  it('undoes what a query writes: scratch tables serve within it, a dropped artifact table is back for the next, transactions are refused', async () => {
    const kept = artifact(log(300));
    await using duck = createArtifactQuery({ source: await backendOf(kept) });
    const scratch = await duck.query(`CREATE TABLE errors AS SELECT * FROM ${kept.id} WHERE line LIKE '% ERROR %'; SELECT count(*) FROM errors`);
    expect(scratch.rows).toEqual([[43]]);
    await expect(duck.query('SELECT count(*) FROM errors')).rejects.toMatchObject({
      code: 'QUERY_FAILED',
      message: expect.stringContaining('Table with name errors does not exist'),
    });

    await duck.query(`DROP TABLE ${kept.id}; SELECT 1`);
    await duck.query(`DELETE FROM ${kept.id}; ATTACH ':memory:' AS elsewhere; USE elsewhere; SELECT 1`);
    const after = await duck.query(`SELECT count(*) FROM ${kept.id}`);
    expect(after).toMatchObject({ rows: [[300]], loadedMs: 0 });

    await expect(duck.query(`COMMIT; DROP TABLE ${kept.id}`)).rejects.toMatchObject({
      code: 'QUERY_FAILED',
      message: expect.stringContaining('BEGIN, COMMIT and ROLLBACK are refused'),
    });
    await expect(duck.query(`DELETE FROM ${kept.id}; COMMIT`)).rejects.toMatchObject({ code: 'QUERY_FAILED' });
    expect((await duck.query(`SELECT count(*) FROM ${kept.id}`)).rows).toEqual([[300]]);
  });

  it('interrupts a query when its signal aborts or it passes timeoutMs, and answers the next', async () => {
    await using duck = createArtifactQuery({ source: await backendOf(), timeoutMs: 60_000 });
    const controller = new AbortController();
    const running = duck.query(LONG_QUERY, { signal: controller.signal });
    setTimeout(() => controller.abort(), 200);
    // The query would take hours, and its time limit is a minute: it ends on the abort, as ABORTED.
    await expect(running).rejects.toMatchObject({ code: 'ABORTED', message: 'The query was cancelled' });
    expect((await duck.query('SELECT 42')).rows).toEqual([[42]]);

    await expect(duck.query(LONG_QUERY, { timeoutMs: 300 })).rejects.toMatchObject({
      code: 'QUERY_FAILED',
      message: expect.stringContaining('ran past its time limit of 300 ms (`timeoutMs`)'),
    });
    expect((await duck.query('SELECT 43')).rows).toEqual([[43]]);
    await expect(duck.query('SELECT 1', { signal: AbortSignal.abort() })).rejects.toMatchObject({ code: 'ABORTED' });
  });

  it('runs one query at a time: a query waiting its turn can be cancelled, the others answer in turn', async () => {
    await using duck = createArtifactQuery({ source: await backendOf() });
    const first = new AbortController();
    const long = duck.query(LONG_QUERY, { signal: first.signal });
    const waiting = new AbortController();
    const cancelled = duck.query('SELECT 1', { signal: waiting.signal });
    const after = duck.query('SELECT 2');
    waiting.abort();
    await expect(cancelled).rejects.toMatchObject({ code: 'ABORTED' });
    first.abort();
    await expect(long).rejects.toMatchObject({ code: 'ABORTED' });
    expect((await after).rows).toEqual([[2]]);
  });

  it('fails a query past memoryMiB saying the limit, and answers the next', async () => {
    await using duck = createArtifactQuery({ source: await backendOf(), memoryMiB: 64 });
    const big = "SELECT count(*), max(c) FROM (SELECT s, count(*) AS c FROM (SELECT repeat('x', 100) || i AS s FROM range(3000000) t(i)) GROUP BY s)";
    const error = await duck.query(big).catch((caught: unknown) => caught);
    expect(error).toMatchObject({
      code: 'QUERY_FAILED',
      message: expect.stringMatching(
        /^The query needed more memory than the task's DuckDB may use, 64 MiB \(`memoryMiB`.*DuckDB said: Out of Memory Error: failed to allocate/,
      ),
    });
    // DuckDB's advice to raise the limit is left out: the limit is locked.
    expect((error as Error).message).not.toContain('SET memory_limit');
    expect((await duck.query('SELECT count(*) FROM range(1000)')).rows).toEqual([[1000]]);
  });

  it('answers a page of rows and counts them all, up to maxRows: past it, "more than"', async () => {
    await using duck = createArtifactQuery({ source: await backendOf(), maxRows: 5_000 });
    const all = await duck.query('SELECT * FROM range(5000)');
    expect(all).toMatchObject({ rowCount: 5_000, rowCountExact: true });
    // A page of `pageChars` characters of JSON rows: "[0]" to "[999]" are 3 to 5 characters each.
    const paged = await duck.query('SELECT * FROM range(5000)', { pageChars: 100 });
    expect(paged.rows.map((row) => row[0])).toEqual(Array.from({ length: paged.rows.length }, (_, n) => n));
    expect(paged.rows.map((row) => JSON.stringify(row).length).reduce((sum, chars) => sum + chars)).toBeLessThanOrEqual(100);
    expect(paged.rows.length).toBeGreaterThan(20);
    expect(await duck.query('SELECT * FROM range(5001)')).toMatchObject({ rowCount: 5_000, rowCountExact: false });
    // Counting stops at maxRows: a trillion rows are not read.
    expect(await duck.query('SELECT * FROM range(1000000000000)')).toMatchObject({ rowCount: 5_000, rowCountExact: false });
  });

  it('keeps an answer bigger than its page as JSON lines when asked, up to keepChars, keyed by unique column names', async () => {
    await using duck = createArtifactQuery({ source: await backendOf() });
    const answer = await duck.query("SELECT range AS a, 'x' || range AS a FROM range(3000)", { pageChars: 200, keep: true });
    expect(answer.rowCount).toBe(3_000);
    expect(answer.kept?.rows).toBe(3_000);
    const lines = answer.kept?.text.split('\n') ?? [];
    expect(lines).toHaveLength(3_000);
    expect(JSON.parse(lines[2_999] as string)).toEqual({ a: 2_999, a_1: 'x2999' });
    // Typed in the query process from every kept row: the serving process keeps them as a table without parsing them.
    expect(answer.kept?.types).toEqual({ a: 'BIGINT', a_1: 'VARCHAR' });
    // A page that holds the whole answer keeps nothing beside it.
    expect((await duck.query('SELECT 1', { keep: true })).kept).toBeUndefined();
  });

  it('gives values as JSON: big integers as strings, decimals as numbers, times as ISO 8601, blobs as hex, nested values as arrays and objects', async () => {
    await using duck = createArtifactQuery({ source: await backendOf() });
    const answer = await duck.query(
      "SELECT 9007199254740993::BIGINT, 12::HUGEINT, 1.25::DECIMAL(10, 2), DATE '2024-01-02', TIMESTAMP '2024-01-02 03:04:05.123', '\\x00\\xFFa'::BLOB, [1, 2], {'a': {'b': 'c'}}, '{\"k\": [true]}'::JSON, NULL, 'NaN'::DOUBLE",
    );
    expect(answer.rows).toEqual([
      ['9007199254740993', 12, 1.25, '2024-01-02', '2024-01-02T03:04:05.123', '00ff61', [1, 2], { a: { b: 'c' } }, '{"k": [true]}', null, 'NaN'],
    ]);
    expect(answer.columns.map((column) => column.type)).toEqual([
      'BIGINT',
      'HUGEINT',
      'DECIMAL(10,2)',
      'DATE',
      'TIMESTAMP',
      'BLOB',
      'INTEGER[]',
      'STRUCT("a" STRUCT("b" VARCHAR))',
      'VARCHAR',
      'INTEGER',
      'DOUBLE',
    ]);
  });

  it('closes idempotently, interrupting a query under way; later queries are refused', async () => {
    const duck = createArtifactQuery({ source: await backendOf() });
    const running = duck.query(LONG_QUERY);
    await new Promise((resolve) => setTimeout(resolve, 100));
    await Promise.all([duck.close(), duck.close()]);
    await expect(running).rejects.toMatchObject({ code: 'ABORTED', message: expect.stringContaining('closed') });
    await duck.close();
    await expect(duck.query('SELECT 1')).rejects.toMatchObject({ code: 'ABORTED' });
    await createArtifactQuery({ source: await backendOf() }).close();
  });

  it('refuses a query without a statement', async () => {
    await using duck = createArtifactQuery({ source: await backendOf() });
    for (const sql of ['', '  ', '-- only a comment', ';'])
      await expect(duck.query(sql)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', message: expect.stringMatching(/^Expected `sql` to/) });
    await expect(duck.query('SELEC 1')).rejects.toMatchObject({
      code: 'QUERY_FAILED',
      message: expect.stringContaining('Parser Error: syntax error at or near "SELEC"'),
    });
  });

  it('checks its options', () => {
    const source = { load: async () => undefined, list: async () => [] };
    expect(() => createArtifactQuery({ source, memoryMiB: 0 })).toThrow('Expected `memoryMiB` to be a positive integer, got 0');
    expect(() => createArtifactQuery({ source, timeoutMs: 2 ** 31 })).toThrow(
      'Expected `timeoutMs` to be a positive integer of at most 2147483647, got 2147483648',
    );
  });

  it('loads 120,000 records and a 400,000-line log (timings printed, not asserted)', async () => {
    const { text, results } = graph(120_000);
    const records = artifact(text.replaceAll('"info"', `"info: ${'x'.repeat(85)}"`), 'records');
    const big = artifact(log(400_000));
    await using duck = createArtifactQuery({ source: await backendOf(records, big) });
    const fromRecords = await duck.query(`SELECT count(*), count(DISTINCT e.id) FROM ${records.id}`);
    expect(fromRecords.rows).toEqual([[results.length, results.length]]);
    const fromLog = await duck.query(`SELECT count(*) FILTER (WHERE line LIKE '% ERROR %'), max(n) FROM ${big.id}`);
    expect(fromLog.rows).toEqual([[Math.ceil(400_000 / 7), 399_999]]);
    const again = await duck.query(`SELECT count(*) FROM ${records.id} JOIN ${big.id} USING (n)`);
    expect(again).toMatchObject({ rows: [[120_000]], loadedMs: 0 });
    console.log(
      `records: ${(records.bytes / 1e6).toFixed(1)} MB, 120,000 records loaded in ${Math.round(fromRecords.loadedMs)} ms (query ${Math.round(fromRecords.elapsedMs)} ms); ` +
        `log: ${(big.bytes / 1e6).toFixed(1)} MB, 400,000 lines loaded in ${Math.round(fromLog.loadedMs)} ms (query ${Math.round(fromLog.elapsedMs)} ms); join of both: ${Math.round(again.elapsedMs)} ms`,
    );
  }, 60_000);
});

describe('toCsv and toRecords', () => {
  const answer: QueryAnswer = {
    columns: [
      { name: 'name', type: 'VARCHAR' },
      { name: 'count', type: 'BIGINT' },
      { name: 'e', type: 'STRUCT(a VARCHAR)' },
      { name: 'name', type: 'VARCHAR' },
    ],
    rows: [
      ['plain', 1, { a: 'x,"y"' }, ''],
      ['a, b', 2, null, 'say "hi"'],
      ['two\nlines', 3, [1, 'q"'], 'cr\r'],
    ],
    rowCount: 3,
    rowCountExact: true,
    tables: [],
    elapsedMs: 1,
    loadedMs: 0,
  };

  it('quotes what RFC 4180 asks and reads back field for field, NULL apart from an empty string', () => {
    const csv = toCsv(answer);
    expect(csv.rows).toBe(3);
    expect(csv.text.split('\n')[1]).toBe('plain,1,"{""a"":""x,\\""y\\""""}",""');
    expect(parseCsv(csv.text)).toEqual([
      ['name', 'count', 'e', 'name'],
      ['plain', '1', '{"a":"x,\\"y\\""}', ''],
      ['a, b', '2', null, 'say "hi"'],
      ['two\nlines', '3', '[1,"q\\""]', 'cr\r'],
    ]);
  });

  it('stops before the row that would pass maxChars, and says how many rows it holds', () => {
    const two = toCsv({ ...answer, rows: answer.rows.slice(0, 2) }).text;
    expect(toCsv(answer, two.length)).toEqual({ text: two, rows: 2 });
    expect(toCsv(answer, two.length + 20)).toEqual({ text: two, rows: 2 });
    expect(toCsv(answer, 1)).toEqual({ text: 'name,count,e,name', rows: 0 });
  });

  it('gives rows as objects, a repeated column name made unique', () => {
    expect(toRecords(answer)[1]).toEqual({ name: 'a, b', count: 2, e: null, name_1: 'say "hi"' });
  });
});
