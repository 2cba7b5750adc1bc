import { isPlainObject, type ConfigPath } from './layers.ts';

/** What a secret is shown as. */
export const REDACTED = '<redacted>';

const SECRET_NAME = /api[-_]?key|token|secret|passw(or)?d|authorization|cookie|credential|private[-_]?key|session[-_]?id/i;

/**
 * Whether the value at `path` is a secret: `server.tokens.*`, and any key whose name says it is one
 * (`apiKey`, an `Authorization` or `X-Api-Key` header, an upstream's `GITHUB_TOKEN` env variable).
 */
export function isSecretPath(path: ConfigPath): boolean {
  if (path[0] === 'server' && path[1] === 'tokens' && path.length === 3) return true;
  const last = path.at(-1);
  return last !== undefined && SECRET_NAME.test(last);
}

/** A URL with its password and any secret-looking query parameter (`?token=`, `?api_key=`) redacted. */
export function redactUrl(text: string): string {
  if (!/^[a-z][a-z0-9+.-]*:\/\//i.test(text) || !URL.canParse(text)) return text;
  const url = new URL(text);
  let changed = false;
  if (url.password !== '') {
    url.password = 'redacted';
    changed = true;
  }
  for (const name of Array.from(url.searchParams.keys())) {
    if (SECRET_NAME.test(name) || /^(key|sig|signature|auth)$/i.test(name)) {
      url.searchParams.set(name, 'redacted');
      changed = true;
    }
  }
  return changed ? url.toString() : text;
}

/** A deep copy of `value` with every secret replaced by {@link REDACTED}; safe to print or log. */
export function redactConfig<T>(value: T, path: ConfigPath = []): T {
  if (Array.isArray(value)) return value.map((item, index) => redactConfig(item, [...path, String(index)])) as T;
  if (isPlainObject(value)) {
    return Object.fromEntries(Object.entries(value).map(([key, child]) => [key, redactConfig(child, [...path, key])])) as T;
  }
  if (typeof value === 'string') return (isSecretPath(path) ? REDACTED : redactUrl(value)) as T;
  return value;
}
