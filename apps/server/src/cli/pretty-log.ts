/** A field's value as `key=value` shows it: bare when it is a word or number, else as JSON. */
const shown = (value: unknown): string =>
  (typeof value === 'string' && /^[\w./:@*-]+$/.test(value)) || typeof value === 'number' || typeof value === 'boolean' ? String(value) : JSON.stringify(value);

/**
 * One JSON log line (pino's, with `level` as its name) as a person reads it on a terminal:
 * `12:03:04.567 info    klym: … method=GET route=/api/tasks/:id`. A line that is not such JSON is passed as it is.
 */
export function prettyLine(json: string): string {
  let entry: Record<string, unknown>;
  try {
    entry = JSON.parse(json) as Record<string, unknown>;
  } catch {
    return json;
  }
  const { level, time, msg, ...fields } = entry;
  const clock = typeof time === 'string' ? time.slice(11, 23) : '';
  const extra = Object.entries(fields)
    .map(([key, value]) => ` ${key}=${shown(value)}`)
    .join('');
  return `${clock} ${String(level).padEnd(7)} ${String(msg ?? '')}${extra}\n`;
}
