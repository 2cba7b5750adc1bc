import { MAX_RECORD_KEYS, type ArtifactRecords } from './artifact-types.ts';
import { isJsonObject, parseJsonExact, recordTypes } from './record-types.ts';

/** A JSON result laid out for the line tools: an envelope line, then one record per line. */
export interface RecordsLayout {
  /** The lines, as an artifact keeps them. */
  readonly text: string;
  readonly records: ArtifactRecords;
}

/** How deep into a document its records are looked for: grynya's `results` is one level down. */
const MAX_DEPTH = 6;

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/**
 * The share of a document's compact bytes its array must hold to be taken as its records: an array beside a
 * bigger rest (ten browser names in a 20 MB compatibility table) is not what the document is about.
 */
export const RECORDS_SHARE = 0.9;

/**
 * Characters of the rest of a document (beside its array) small enough that the array is what it is about
 * whatever their share: grynya's `{"status":"success","results":[…]}` with two results is records.
 */
export const SMALL_REST_CHARS = 1_024;

/**
 * How a JSON text is kept: as records (its biggest array of objects, when that holds at least
 * {@link RECORDS_SHARE} of the document, or the rest is at most {@link SMALL_REST_CHARS}), as one `document` (any other JSON: its tables are the whole value
 * and its paths), or `undefined` when it is not JSON.
 */
export function jsonLayoutOf(text: string): RecordsLayout | 'document' | undefined {
  const first = text.trimStart()[0];
  if (first !== '{' && first !== '[') return undefined;
  const document = parseJsonExact(text) as Json | undefined;
  if (document === undefined) return undefined;
  const found = biggestArrayOfObjects(document, [], 0);
  if (found === undefined) return 'document';
  const { path, array } = found;
  const firstLine = path.length === 0 ? 0 : 1;
  const lines = array.map((record) => JSON.stringify(record));
  const recordChars = lines.reduce((sum, line) => sum + line.length + 1, 0);
  if (firstLine === 1) {
    const note = `[${array.length} records: lines 1-${array.length} of this artifact]`;
    lines.unshift(JSON.stringify(replaceAt(document, path, note)));
    // The rest of the document, without the note put in the array's place.
    const rest = (lines[0] as string).length - JSON.stringify(note).length;
    if (rest > SMALL_REST_CHARS && recordChars < RECORDS_SHARE * (recordChars + rest)) return 'document';
  }
  const types = recordTypes(array);
  return {
    text: lines.join('\n'),
    records: {
      count: array.length,
      firstLine,
      path,
      keys: keysOf(array[0] as Record<string, Json>),
      originalBytes: Buffer.byteLength(text),
      ...(types === undefined ? {} : { types }),
    },
  };
}

/**
 * `text` as records when it is JSON whose biggest array of objects is most of it (see {@link jsonLayoutOf}):
 * the elements one per line (compact JSON), after a first line holding the rest of the document (the
 * envelope, with the array replaced by a note of where its records are) when the array is not the whole
 * document. `undefined` for any other text.
 */
export function recordsOf(text: string): RecordsLayout | undefined {
  const layout = jsonLayoutOf(text);
  return layout === 'document' ? undefined : layout;
}

/**
 * Records laid out as {@link recordsOf} lays a bare array out: one per line, no envelope. For answers Klym
 * makes itself (a map's, a query's), so that they are a table too.
 */
export function recordsFrom(rows: readonly Record<string, unknown>[]): RecordsLayout {
  return recordLines(rows.map((row) => JSON.stringify(row)).join('\n'), rows);
}

/** `text`, records one per line, with what is known of `rows`, its records: their count, keys and types. */
function recordLines(text: string, rows: readonly unknown[]): RecordsLayout {
  const types = recordTypes(rows);
  return {
    text,
    records: {
      count: rows.length,
      firstLine: 0,
      path: [],
      keys: rows.length === 0 ? [] : keysOf(rows[0] as Record<string, Json>),
      originalBytes: 0,
      ...(types === undefined ? {} : { types }),
    },
  };
}

/** The biggest array whose elements are all objects, breadth of the search bounded by `MAX_DEPTH`. */
function biggestArrayOfObjects(value: Json, path: string[], depth: number): { path: string[]; array: Record<string, Json>[] } | undefined {
  if (depth > MAX_DEPTH || value === null || typeof value !== 'object') return undefined;
  let best: { path: string[]; array: Record<string, Json>[] } | undefined;
  if (Array.isArray(value)) {
    if (value.length > 0 && value.every(isJsonObject<Json>)) best = { path, array: value };
    // An array of arrays or of mixed values is not records; the records inside its elements are not one table either.
    return best;
  }
  for (const [key, child] of Object.entries(value)) {
    const inner = biggestArrayOfObjects(child, [...path, key], depth + 1);
    if (inner !== undefined && (best === undefined || inner.array.length > best.array.length)) best = inner;
  }
  return best;
}

/** `document` with the value at `path` replaced by `note`, the rest shared. */
function replaceAt(document: Json, path: readonly string[], note: string): Json {
  if (path.length === 0) return note;
  const [key, ...rest] = path as [string, ...string[]];
  const object = document as Record<string, Json>;
  return { ...object, [key]: replaceAt(object[key] as Json, rest, note) };
}

/** A record's keys, a nested object's as `parent.child`, at most `MAX_RECORD_KEYS`. */
function keysOf(record: Record<string, Json>): string[] {
  const keys: string[] = [];
  const walk = (object: Record<string, Json>, prefix: string, depth: number): void => {
    for (const [key, value] of Object.entries(object)) {
      if (keys.length >= MAX_RECORD_KEYS) return;
      if (isJsonObject<Json>(value) && depth < 3 && Object.keys(value).length > 0) walk(value, `${prefix}${key}.`, depth + 1);
      else keys.push(`${prefix}${key}`);
    }
  };
  walk(record, '', 0);
  return keys;
}
