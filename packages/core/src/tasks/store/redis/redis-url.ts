import { KlymError } from '../../../errors.ts';

/** Where a Redis server is and how to log in, as both ioredis and BullMQ take it. */
export interface RedisAddress {
  readonly host: string;
  readonly port: number;
  readonly db: number;
  readonly username?: string;
  readonly password?: string;
  /** Present for `rediss://`: TLS with Node's defaults. */
  readonly tls?: Record<string, never>;
}

/** A Redis server as a URL names it: what ioredis needs to connect, and how to name it in messages. */
export interface RedisTarget {
  /** Host, port, database, credentials and TLS. */
  readonly options: RedisAddress;
  /** `host:port/db`: never the credentials, so it may go into any message. */
  readonly where: string;
  /** The URL's password, to keep out of messages that quote Redis or its client. */
  readonly secrets: readonly string[];
}

/**
 * Reads `redis://[user:password@]host[:port][/db]` (`rediss://` for TLS) into ioredis options: Klym's one
 * Redis URL parser (the store, the queue and `openTaskBackend` all read their URL here). They are passed as
 * separate fields, never as the URL: BullMQ builds its own connections from options whose defaults
 * (`127.0.0.1:6379`) would win over a URL's host and port.
 *
 * @throws {KlymError} `CONFIG_INVALID` naming what is wrong, never quoting the URL (it may hold a password)
 */
export function redisTargetOf(url: string): RedisTarget {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new KlymError('CONFIG_INVALID', 'Expected the Redis `url` to be redis://[user:password@]host:port/db or rediss://…, got a string that is not a URL');
  }
  if (parsed.protocol !== 'redis:' && parsed.protocol !== 'rediss:') {
    throw new KlymError('CONFIG_INVALID', `Expected the Redis \`url\` to start with redis:// or rediss://, got ${parsed.protocol}//…`);
  }
  if (parsed.hostname === '') throw new KlymError('CONFIG_INVALID', 'Expected the Redis `url` to name a host, as in redis://host:6379/0');
  const database = parsed.pathname.replace(/^\//, '') || '0';
  if (!/^\d+$/.test(database))
    throw new KlymError(
      'CONFIG_INVALID',
      `Expected the Redis \`url\`'s path to be a database number, as in redis://host:6379/0, got /${database.slice(0, 20)}`,
    );
  const port = parsed.port === '' ? 6379 : Number(parsed.port);
  const db = Number(database);
  const username = decodeURIComponent(parsed.username);
  const password = decodeURIComponent(parsed.password);
  const options: RedisAddress = {
    // WHATWG keeps an IPv6 host in brackets; a socket wants it bare.
    host: parsed.hostname.replace(/^\[(.*)\]$/, '$1'),
    port,
    db,
    ...(username === '' ? {} : { username }),
    ...(password === '' ? {} : { password }),
    ...(parsed.protocol === 'rediss:' ? { tls: {} } : {}),
  };
  return { options, where: `${parsed.hostname}:${port}/${db}`, secrets: password === '' ? [] : [password, parsed.password] };
}

/** `text` with every one of `secrets` replaced, so nothing shown can carry them. */
export function scrub(text: string, secrets: readonly string[]): string {
  return secrets.reduce((scrubbed, secret) => (secret === '' ? scrubbed : scrubbed.replaceAll(secret, '[redacted]')), text);
}
