import type { DuckDBConnection } from '@duckdb/node-api';
import { isRawJson, parseJsonExact } from './record-types.ts';

/** Characters of a JSON document made into its `_doc` and `_paths` tables at most; a bigger one keeps its lines only. */
export const MAX_DOCUMENT_CHARS = 128 * 1024 * 1024;

/** V8's collector, where the process exposes it (a query process does: `--expose-gc`). */
const collect = (globalThis as { gc?: () => void }).gc;

/** Rows appended between two flushes. */
const APPEND_BATCH = 16_384;

/** A key as a DuckDB JSON path writes it: bare when it is an identifier, else quoted. */
const pathKey = (key: string): string => (/^[A-Za-z_][A-Za-z0-9_]*$/.test(key) ? `.${key}` : `."${key.replaceAll('\\', '\\\\').replaceAll('"', '\\"')}"`);

/** A value's type as a path's row names it, as DuckDB's `json_type` does. */
function typeOf(value: unknown): string {
  if (value === null) return 'NULL';
  if (isRawJson(value)) return 'BIGINT';
  switch (typeof value) {
    case 'string':
      return 'VARCHAR';
    case 'boolean':
      return 'BOOLEAN';
    case 'number':
      return Number.isInteger(value) ? 'BIGINT' : 'DOUBLE';
    default:
      return Array.isArray(value) ? 'ARRAY' : 'OBJECT';
  }
}

/** A scalar as the `value` column holds it: a string as it is, a number or boolean as JSON writes it. */
function valueText(value: unknown): string | undefined {
  if (value === null || typeof value === 'object') return isRawJson(value) ? value.rawJSON : undefined;
  return typeof value === 'string' ? value : String(value as number | boolean);
}

/**
 * Makes a JSON document's two tables beside its lines: `<id>_doc`, one row holding the whole value (`doc`, its
 * JSON text, for DuckDB's JSON functions: `doc->'$.css.properties'`, `json_keys(doc)`), and `<id>_paths`, a row per
 * value in it (`path` as DuckDB's JSON paths write it, `$.a.b[0]`; `key`, its key or index; `type`, as
 * `json_type` names it; `value`, a scalar's text, NULL for an object or array; `depth`, 0 for the root), so
 * that a question over a deep object is one query. Returns false, making neither, for a text that is not
 * JSON or is past {@link MAX_DOCUMENT_CHARS}.
 */
export async function loadDocument(connection: DuckDBConnection, id: string, text: string): Promise<boolean> {
  if (text.length > MAX_DOCUMENT_CHARS) return false;
  const document = parseJsonExact(text);
  if (document === undefined) return false;
  // VARCHAR, not JSON: DuckDB's JSON functions take it as it is, and a cast to JSON would parse 20 MB once more.
  await connection.run(`CREATE TABLE "${id}_doc" AS SELECT $1::VARCHAR AS doc`, [text]);
  await connection.run(`CREATE TABLE "${id}_paths" (path VARCHAR, key VARCHAR, type VARCHAR, value VARCHAR, depth INTEGER)`);
  const appender = await connection.createAppender(`${id}_paths`);
  try {
    // Depth first, without recursion: a document nested ten thousand deep is still a table.
    const stack: [unknown, string, string | null, number][] = [[document, '$', null, 0]];
    let rows = 0;
    for (let next = stack.pop(); next !== undefined; next = stack.pop()) {
      const [value, path, key, depth] = next;
      const type = typeOf(value);
      appender.appendVarchar(path);
      if (key === null) appender.appendNull();
      else appender.appendVarchar(key);
      appender.appendVarchar(type);
      const scalar = valueText(value);
      if (scalar === undefined) appender.appendNull();
      else appender.appendVarchar(scalar);
      appender.appendInteger(depth);
      appender.endRow();
      // Rows go into the table a batch at a time, so that the appender holds one batch, not the document's.
      if (++rows % APPEND_BATCH === 0) {
        appender.flushSync();
        // The paths made for a batch are garbage once appended: collected now, the heap stays the document's size.
        if (rows % (APPEND_BATCH * 4) === 0) collect?.();
      }
      if (type === 'ARRAY') {
        const items = value as unknown[];
        for (let at = items.length - 1; at >= 0; at--) stack.push([items[at], `${path}[${at}]`, String(at), depth + 1]);
      } else if (type === 'OBJECT') {
        const entries = Object.entries(value as Record<string, unknown>);
        for (let at = entries.length - 1; at >= 0; at--) {
          const [child, inner] = entries[at] as [string, unknown];
          stack.push([inner, `${path}${pathKey(child)}`, child, depth + 1]);
        }
      }
    }
    appender.flushSync();
  } finally {
    appender.closeSync();
  }
  return true;
}
