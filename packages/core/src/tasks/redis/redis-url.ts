import { KlymError } from '../../errors.ts';

/** What a Redis URL says that Klym may show, and the secret it must not. */
export interface RedisAddress {
  /** `host:port/db`: what messages and `/healthz` show. */
  readonly where: string;
  /** The URL's password, to scrub from anything shown; absent when it has none. */
  readonly password?: string;
}

/**
 * Reads `redis://[user:password@]host[:port][/db]` (or `rediss://`, TLS) as ioredis does, and says where
 * it points without the password.
 *
 * @throws {KlymError} `CONFIG_INVALID` when it is not such a URL; the message never holds the password.
 */
export function describeRedisUrl(url: string): RedisAddress {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw invalid('a value that is not a URL');
  }
  const password = parsed.password === '' ? undefined : decodeURIComponent(parsed.password);
  if (password !== undefined) parsed.password = '***';
  const shown = JSON.stringify(parsed.href);
  if (parsed.protocol !== 'redis:' && parsed.protocol !== 'rediss:') throw invalid(shown);
  if (parsed.hostname === '') throw invalid(`${shown}, which names no host`);
  const db = parsed.pathname.replace(/^\//, '') || '0';
  if (!/^\d+$/.test(db)) throw invalid(`${shown}, whose database \`${db}\` is not a number`);
  const host = parsed.hostname.replace(/^\[(.*)\]$/, '$1');
  const where = `${host.includes(':') ? `[${host}]` : host}:${parsed.port || '6379'}/${Number(db)}`;
  return password === undefined ? { where } : { where, password };
}

/** `text` with every occurrence of `secret` replaced, so nothing shown can carry it. */
export function scrub(text: string, secret: string | undefined): string {
  return secret === undefined || secret === '' ? text : text.replaceAll(secret, '[redacted]');
}

const invalid = (got: string): KlymError =>
  new KlymError('CONFIG_INVALID', `Expected \`url\` to be redis://[user:password@]host:port/db or rediss://… for TLS, got ${got}`);
