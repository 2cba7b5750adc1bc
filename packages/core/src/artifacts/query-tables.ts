import type { DuckDBConnection } from '@duckdb/node-api';
import type { ArtifactRecords } from './artifact-types.ts';
import { loadDocument, MAX_DOCUMENT_CHARS } from './document-tables.ts';
import { isJsonObject } from './record-types.ts';

/**
 * An artifact's id as SQL names its tables: `art_` and 12 hex digits, in any case, not inside a longer word;
 * a JSON document's `_doc` and `_paths` tables after it.
 */
const TABLE_NAME = /(?<![\w$])(art_[0-9a-f]{12})(?:_doc|_paths)?(?![\w$])/gi;

/**
 * The artifacts whose tables `sql` may name, lower-cased, first mention first. Found in the text, not parsed:
 * DuckDB's parser cannot name the tables of a statement that refers to a table made by an earlier one. A name
 * in a string or a comment is found too: its artifact is loaded for nothing, and one the task has not is not an error.
 */
export function tablesIn(sql: string): string[] {
  return [...new Set(Array.from(sql.matchAll(TABLE_NAME), (match) => (match[1] as string).toLowerCase()))];
}

/** `name` as a SQL identifier, whatever it holds. */
export function quoteName(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}

/**
 * A slice's lines into `table`: the slice bound as `$1`, its first line numbered `$3`, `\r` before a newline
 * left out, lines from `$2` on.
 */
const insertLines = (table: string): string => `INSERT INTO ${table}
  SELECT n, CASE WHEN ends_with(line, chr(13)) THEN line[1:-2] ELSE line END AS line
  FROM (SELECT (generate_subscripts(l, 1) - 1 + $3)::BIGINT AS n, unnest(l) AS line FROM (SELECT string_split($1, chr(10)) AS l))
  WHERE n >= $2`;

/**
 * Characters sent at once: a text reaches its query process a slice of whole lines at a time (a line longer
 * than a slice whole), so that the process holds one slice, and DuckDB's list of its lines, beside the table.
 */
export const SLICE_CHARS = 4_000_000;

/** A slice of whole lines of a text, and where the next starts (past the slice's last newline). */
export interface LineSlice {
  readonly text: string;
  readonly end: number;
}

/**
 * The slice of `text` (its last newline already left out) that starts at `from`: whole lines up to about
 * `SLICE_CHARS`, or one line longer than that whole. `end` past `text.length` means it was the last.
 */
export function sliceOfLines(text: string, from: number): LineSlice {
  let end = Math.min(text.length, from + SLICE_CHARS);
  if (end < text.length) {
    // Whole lines: back to the last newline of the slice, or on to the end of a line longer than a slice.
    const back = text.lastIndexOf('\n', end);
    end = back >= from ? back : text.indexOf('\n', end);
    if (end === -1) end = text.length;
  }
  return { text: text.slice(from, end), end: end + 1 };
}

/** Reads an artifact's text (its last newline left out) a slice at a time, from character `from`. */
export type SliceReader = (from: number) => Promise<LineSlice>;

/** The lines `read` gives into `table`, from line `from` on, a slice at a time. */
async function loadLines(connection: DuckDBConnection, table: string, chars: number, read: SliceReader, from: number, keep?: string[]): Promise<void> {
  let line = 0;
  for (let start = 0; start < chars;) {
    const slice = await read(start);
    keep?.push(slice.text);
    const newlines = countNewlines(slice.text);
    if (line + newlines >= from) await connection.run(insertLines(table), [slice.text, from, line]);
    line += newlines + 1;
    start = slice.end;
  }
}

function countNewlines(text: string): number {
  let count = 0;
  for (let at = text.indexOf('\n'); at !== -1; at = text.indexOf('\n', at + 1)) count++;
  return count;
}

/** The staging table of a records artifact's lines; a temporary table, so only its own connection sees it. */
const STAGING = 'klym_staging_lines';

/** What loading an artifact's table needs to know of it besides its text. */
export interface TableSource {
  /** Its records, when it was JSON kept as records. */
  readonly records?: ArtifactRecords;
  /** Characters of its text, its last newline left out. */
  readonly chars: number;
  /** `document` for one JSON document that is not records: its `_doc` and `_paths` tables are made too. */
  readonly json?: 'document';
}

/**
 * Makes artifact `id`'s table: a text artifact as `n` (its line number, 0-based) and `line`; records as `n`
 * (the record's line number in the artifact) and one column per key of its records (see
 * {@link recordColumns}). Its text is read a slice at a time (`read`) and split inside DuckDB, which reads no
 * file. Throws DuckDB's error as it is (the caller says which artifact failed).
 */
export async function loadArtifact(connection: DuckDBConnection, id: string, source: TableSource, read: SliceReader): Promise<void> {
  const table = quoteName(id);
  // As the line tools count lines: an empty text has none, and a last newline ends a line without starting one.
  if (source.chars === 0) {
    await connection.run(source.records === undefined ? `CREATE TABLE ${table} (n BIGINT, line VARCHAR)` : `CREATE TABLE ${table} (n BIGINT, record JSON)`);
    return;
  }
  if (source.records === undefined) {
    await connection.run(`CREATE TABLE ${table} (n BIGINT, line VARCHAR)`);
    // A document's slices are kept to make its other tables: whole lines, so joined by the newlines between them.
    const slices: string[] | undefined = source.json === 'document' && source.chars <= MAX_DOCUMENT_CHARS ? [] : undefined;
    await loadLines(connection, table, source.chars, read, 0, slices);
    if (slices !== undefined) await loadDocument(connection, id, slices.join('\n'));
    return;
  }
  await connection.run(`CREATE OR REPLACE TEMPORARY TABLE ${STAGING} (n BIGINT, line VARCHAR)`);
  try {
    await loadLines(connection, STAGING, source.chars, read, source.records.firstLine);
    // Typed from every value of every record when it was kept (`records.types`); an artifact kept before, by DuckDB from all its records.
    let structure: unknown = source.records.types;
    if (structure === undefined) {
      const inferred = await connection.runAndReadAll(`SELECT json_group_structure(line::JSON)::VARCHAR FROM ${STAGING}`);
      const text = inferred.getRows()[0]?.[0];
      structure = typeof text === 'string' ? (JSON.parse(text) as unknown) : null;
    }
    const columns = recordColumns(structure);
    if (columns === undefined) {
      await connection.run(`CREATE TABLE ${table} AS SELECT n, line::JSON AS record FROM ${STAGING}`);
      return;
    }
    const select = columns.names.map((name, at) => `struct_extract_at(r, ${at + 1}) AS ${quoteName(name)}`).join(', ');
    await connection.run(`CREATE TABLE ${table} AS SELECT n, ${select} FROM (SELECT n, json_transform(line, $1) AS r FROM ${STAGING})`, [
      JSON.stringify(columns.structure),
    ]);
  } finally {
    await connection.run(`DROP TABLE IF EXISTS ${STAGING}`);
  }
}

/**
 * A records table's columns from the structure DuckDB inferred (`json_group_structure`): one per key, in
 * the order keys were first seen, typed as `read_json` types them (an integer as BIGINT, not UBIGINT; a
 * key that was always null, or an object that was always empty, as JSON). A key `n` is column `n_1`, as a
 * key that differs from an earlier one only in case gets `_1`, `_2`…: `n` is the line number. `undefined`
 * when the records are not objects with keys: the table is then `n` and `record` (JSON).
 */
export function recordColumns(structure: unknown): { readonly names: readonly string[]; readonly structure: Record<string, unknown> } | undefined {
  if (!isJsonObject(structure) || Object.keys(structure).length === 0) return undefined;
  const taken = new Set(['n']);
  const names = Object.keys(structure).map((key) => {
    const base = key === '' ? '_' : key;
    let name = base;
    for (let suffix = 1; taken.has(name.toLowerCase()); suffix++) name = `${base}_${suffix}`;
    taken.add(name.toLowerCase());
    return name;
  });
  return { names, structure: normalized(structure) as Record<string, unknown> };
}

/** `structure` with the types `read_json` would give; built with `fromEntries` so that a key `__proto__` stays a key. */
function normalized(structure: unknown): unknown {
  if (Array.isArray(structure)) return structure.map(normalized);
  if (isJsonObject(structure)) {
    const entries = Object.entries(structure);
    return entries.length === 0 ? 'JSON' : Object.fromEntries(entries.map(([key, value]) => [key, normalized(value)]));
  }
  if (structure === 'UBIGINT') return 'BIGINT';
  if (structure === 'NULL') return 'JSON';
  return structure;
}
