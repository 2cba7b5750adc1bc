import {
  DuckDBBlobValue,
  DuckDBDecimalValue,
  DuckDBIntervalValue,
  DuckDBStructType,
  DuckDBStructValue,
  DuckDBTimestampMillisecondsValue,
  DuckDBTimestampNanosecondsValue,
  DuckDBTimestampSecondsValue,
  DuckDBTimestampTZValue,
  DuckDBTimestampValue,
  JsonDuckDBValueConverter,
  type DuckDBValueConverter,
  type Json,
} from '@duckdb/node-api';

const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);

/** A DuckDB value as JSON, as `QueryAnswer.rows` says (in a query process); DuckDB's own JSON converter for the rest. */
export const toJson: DuckDBValueConverter<Json> = (value, type, convert) => {
  if (value === null) return null;
  if (typeof value === 'bigint') return value >= -MAX_SAFE && value <= MAX_SAFE ? Number(value) : String(value);
  if (value instanceof DuckDBDecimalValue) return value.toDouble();
  if (value instanceof DuckDBBlobValue) return Buffer.from(value.bytes).toString('hex');
  if (value instanceof DuckDBIntervalValue) return String(value);
  if (
    value instanceof DuckDBTimestampValue ||
    value instanceof DuckDBTimestampSecondsValue ||
    value instanceof DuckDBTimestampMillisecondsValue ||
    value instanceof DuckDBTimestampNanosecondsValue ||
    value instanceof DuckDBTimestampTZValue
  ) {
    return String(value).replace(' ', 'T');
  }
  // Built with fromEntries, so that a field `__proto__` stays a field.
  if (value instanceof DuckDBStructValue && type instanceof DuckDBStructType) {
    return Object.fromEntries(Object.entries(value.entries).map(([name, field]) => [name, convert(field, type.typeForEntry(name), convert)]));
  }
  return JsonDuckDBValueConverter(value, type, convert);
};
