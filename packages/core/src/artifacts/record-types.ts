/**
 * A records table's types, from every value of every record: what `json_transform` takes (`BIGINT`,
 * `DOUBLE`, `BOOLEAN`, `VARCHAR`, `HUGEINT`, `JSON`, a nested object as `{ key: type }`, a list as
 * `[type]`). A key whose values disagree keeps them all exactly: integers and fractions as `DOUBLE`, anything
 * else as `JSON` (its values' own JSON text). A key first seen in the last record is a column too.
 */
export type ColumnType = string | { readonly [key: string]: ColumnType } | readonly ColumnType[];

/** Keys of a nested object that make it a STRUCT at most: past it (a map keyed by ids, say) it is `JSON`. */
const MAX_STRUCT_KEYS = 200;

/** Columns of a records table at most: past it the records are one `record JSON` column. */
export const MAX_COLUMNS = 1_000;

/** While folding: a type, or a nested object's or list's, still open to more values. */
type Folding = string | Struct | List;
interface Struct {
  readonly fields: Map<string, Folding>;
}
interface List {
  element: Folding;
}

const isStruct = (type: Folding): type is Struct => typeof type === 'object' && 'fields' in type;
const isList = (type: Folding): type is List => typeof type === 'object' && 'element' in type;

/** Whether `value` is an integer past 2^53 kept with its digits (`JSON.rawJSON`, see `artifact-records.ts`). */
export const isRawJson = (value: unknown): value is { readonly rawJSON: string } =>
  (JSON as unknown as { isRawJSON(value: unknown): boolean }).isRawJSON(value);

/** Whether `value` is a JSON object: not `null`, not an array, not a kept big integer ({@link isRawJson}). */
export function isJsonObject<Value = unknown>(value: unknown): value is Record<string, Value> {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && !isRawJson(value);
}

/**
 * A number of 16 digits or more where a JSON value starts (after `:`, `[` or `,`): an integer past 2^53 may be
 * there, which `JSON.parse` would round. Digits inside a string (an id, a trace) are not looked at, so that a
 * document without such a number is parsed without a reviver, which costs a string for every value.
 */
const LONG_NUMBER = /[:[,]\s*-?\d{16}/;

/**
 * `text` parsed as JSON, integers past 2^53 kept with their digits (as `JSON.rawJSON`, which `JSON.stringify`
 * writes back as they were); `undefined` when it is not JSON.
 */
export function parseJsonExact(text: string): unknown {
  try {
    if (!LONG_NUMBER.test(text)) return JSON.parse(text) as unknown;
    const rawJson = (JSON as unknown as { rawJSON(text: string): unknown }).rawJSON;
    return JSON.parse(text, (_key, value: unknown, context?: { source?: string }) =>
      typeof value === 'number' && !Number.isSafeInteger(value) && context?.source !== undefined && /^-?\d+$/.test(context.source)
        ? rawJson(context.source)
        : value,
    ) as unknown;
  } catch {
    return undefined;
  }
}

const INT64_MAX = 2n ** 63n;

function scalar(value: unknown): string {
  switch (typeof value) {
    case 'boolean':
      return 'BOOLEAN';
    case 'string':
      return 'VARCHAR';
    case 'number':
      return Number.isInteger(value) && Math.abs(value) < 2 ** 63 ? 'BIGINT' : 'DOUBLE';
    default: {
      const digits = BigInt((value as { rawJSON: string }).rawJSON);
      return digits < INT64_MAX && digits >= -INT64_MAX ? 'BIGINT' : 'HUGEINT';
    }
  }
}

/** Two scalar types as one: the same, an integer beside a fraction as `DOUBLE`, anything else `JSON`. */
function joinScalars(a: string, b: string): string {
  if (a === b) return a;
  const numbers = new Set([a, b]);
  if (numbers.has('DOUBLE') && (numbers.has('BIGINT') || numbers.has('HUGEINT'))) return a === 'HUGEINT' || b === 'HUGEINT' ? 'JSON' : 'DOUBLE';
  if (numbers.has('BIGINT') && numbers.has('HUGEINT')) return 'HUGEINT';
  return 'JSON';
}

/** `type` with `value` folded in; `NULL` stands for a key seen only as null. */
function fold(type: Folding, value: unknown): Folding {
  if (value === null || value === undefined || type === 'JSON') return type;
  if (typeof value !== 'object' || isRawJson(value))
    return type === 'NULL' ? scalar(value) : typeof type === 'string' ? joinScalars(type, scalar(value)) : 'JSON';
  if (Array.isArray(value)) {
    if (type !== 'NULL' && !isList(type)) return 'JSON';
    const list: List = type === 'NULL' ? { element: 'NULL' } : type;
    for (const element of value) list.element = fold(list.element, element);
    return list;
  }
  if (type !== 'NULL' && !isStruct(type)) return 'JSON';
  const struct: Struct = type === 'NULL' ? { fields: new Map() } : type;
  for (const [key, field] of Object.entries(value)) struct.fields.set(key, fold(struct.fields.get(key) ?? 'NULL', field));
  return struct.fields.size > MAX_STRUCT_KEYS ? 'JSON' : struct;
}

/** A folded type as `json_transform` takes it: a key never seen but as null, an empty object or list, as `JSON`. */
function settled(type: Folding): ColumnType {
  if (typeof type === 'string') return type === 'NULL' ? 'JSON' : type;
  if (isList(type)) return [settled(type.element)];
  if (type.fields.size === 0) return 'JSON';
  // Built with fromEntries, so that a key `__proto__` stays a key.
  return Object.fromEntries([...type.fields].map(([key, field]) => [key, settled(field)]));
}

/**
 * The columns of `records` (one per key of any record, in the order keys were first seen) with the type of
 * all their values; `undefined` when a record is not an object, or there are more than {@link MAX_COLUMNS} keys.
 */
export function recordTypes(records: Iterable<unknown>): { readonly [key: string]: ColumnType } | undefined {
  const types = createRecordTypes();
  for (const record of records) if (!types.add(record)) return undefined;
  return types.types();
}

/** {@link recordTypes} a record at a time, for records that are not all held at once (a query's answer as it streams). */
export function createRecordTypes(): {
  /** Folds `record` in; false once the records cannot be typed (a record that is not an object). */
  add(record: unknown): boolean;
  types(): { readonly [key: string]: ColumnType } | undefined;
} {
  let all: Folding = 'NULL';
  return {
    add(record) {
      if (!isJsonObject(record)) all = 'JSON';
      if (all !== 'JSON') all = fold(all, record);
      return all !== 'JSON';
    },
    types: () =>
      all === 'NULL' || !isStruct(all) || all.fields.size === 0 || all.fields.size > MAX_COLUMNS
        ? undefined
        : (settled(all) as { readonly [key: string]: ColumnType }),
  };
}

/** `type` as DuckDB names it (`BIGINT`, `STRUCT("id" VARCHAR, "n" BIGINT)`, `VARCHAR[]`), as `DESCRIBE` says. */
export function duckType(type: ColumnType): string {
  if (typeof type === 'string') return type;
  if (Array.isArray(type)) return `${duckType(type[0] as ColumnType)}[]`;
  const fields = Object.entries(type as { readonly [key: string]: ColumnType }).map(([key, field]) => `"${key.replaceAll('"', '""')}" ${duckType(field)}`);
  return `STRUCT(${fields.join(', ')})`;
}
