import type { Json } from '@duckdb/node-api';

/** An answer's columns and rows, as a `QueryAnswer` has them. */
export interface AnswerRows {
  readonly columns: readonly { readonly name: string }[];
  readonly rows: readonly (readonly Json[])[];
}

/**
 * An answer as CSV: a header line, then a line per row, for as many rows as fit in `maxChars` (the header
 * is always given). Fields holding `,`, `"`, a newline or a carriage return are quoted, quotes doubled (RFC
 * 4180); NULL is an empty field and an empty string `""`; arrays and objects are compact JSON. Lines end
 * with `\n`. `rows` says how many rows the text holds, so the caller can say what was left out.
 */
export function toCsv(answer: AnswerRows, maxChars = Number.POSITIVE_INFINITY): { readonly text: string; readonly rows: number } {
  const lines = [answer.columns.map((column) => csvField(column.name)).join(',')];
  let length = (lines[0] as string).length;
  for (const row of answer.rows) {
    const line = row.map(csvField).join(',');
    if (length + 1 + line.length > maxChars) break;
    lines.push(line);
    length += 1 + line.length;
  }
  return { text: lines.join('\n'), rows: lines.length - 1 };
}

function csvField(value: unknown): string {
  if (value === null || value === undefined) return '';
  const text = typeof value === 'object' ? JSON.stringify(value) : String(value as string | number | boolean);
  return text === '' || /[",\n\r]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
}

/** Column names made unique as DuckDB names them: a repeated name gets `_1`, `_2`…. */
export function uniqueNames(columns: readonly { readonly name: string }[]): string[] {
  const taken = new Set<string>();
  return columns.map(({ name }) => {
    let unique = name;
    for (let suffix = 1; taken.has(unique); suffix++) unique = `${name}_${suffix}`;
    taken.add(unique);
    return unique;
  });
}

/**
 * An answer's rows as objects keyed by column name (a repeated name made unique, {@link uniqueNames}), to
 * keep a small answer as records (`recordsFrom`).
 */
export function toRecords(answer: AnswerRows): Record<string, Json>[] {
  const names = uniqueNames(answer.columns);
  return answer.rows.map((row) => Object.fromEntries(names.map((name, at) => [name, row[at] ?? null])));
}
