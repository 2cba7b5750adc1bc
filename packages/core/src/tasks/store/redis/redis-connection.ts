import { Redis } from 'ioredis';
import { KlymError } from '../../../errors.ts';
import { redisTargetOf, scrub } from './redis-url.ts';
import { REDIS_SCRIPTS } from './scripts.ts';

/** What {@link openRedisConnection} needs. */
export interface RedisConnectionOptions {
  readonly url: string;
  readonly connectTimeoutMs: number;
  readonly commandTimeoutMs: number;
}

/** One connection to the store's Redis: every command of the store goes through it, in order. */
export interface RedisConnection {
  readonly client: Redis;
  /** `host:port/db`, never the password. */
  readonly where: string;
  /** What the server's settings put at risk, one line each. */
  readonly warnings: readonly string[];
  /** `error` of a call that asked Redis to `doing` (`read task x`) as the `STORE_UNAVAILABLE` it is, scrubbed of the password. */
  failure(error: unknown, doing: string): KlymError;
  /** Lets commands already sent finish, then quits; drops the connection when Redis does not answer. */
  close(): Promise<void>;
}

/** Redis 6.2 brought XTRIM MINID, which trims a task's log in one command. */
const MINIMUM_VERSION = [6, 2] as const;

/** Errors before the first `ready` that waiting will not cure. */
const FATAL_AT_START = /WRONGPASS|NOAUTH|invalid password|invalid username|DB index/i;

/**
 * Connects to Redis and resolves once it answers, within `connectTimeoutMs`; then reads its version and
 * the settings Klym relies on. The connection fails fast instead of queueing: a command sent while it is
 * down rejects at once (`enableOfflineQueue: false`), one in flight when it drops rejects rather than
 * being sent again (`maxRetriesPerRequest: 0`: its outcome is unknown, and replaying a compare-and-set
 * would answer wrongly), and one Redis does not answer rejects after `commandTimeoutMs`. ioredis
 * reconnects by itself (every 100 ms at first, then every second), so calls work again once Redis is back.
 *
 * @throws {KlymError} `STORE_UNAVAILABLE`, one line naming `host:port/db`, when Redis cannot be reached in
 * time, refuses the URL's credentials or database, or is older than 6.2.
 */
export async function openRedisConnection(options: RedisConnectionOptions): Promise<RedisConnection> {
  const { options: address, where, secrets } = redisTargetOf(options.url);
  const client = new Redis({
    ...address,
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    enableAutoPipelining: true,
    connectTimeout: options.connectTimeoutMs,
    commandTimeout: options.commandTimeoutMs,
    retryStrategy: (attempt) => Math.min(attempt * 100, 1_000),
    connectionName: 'klym-task-store',
    scripts: REDIS_SCRIPTS,
  });
  let lastError: string | undefined;
  // Without a listener ioredis prints every connection error; the last one is what a failed call reports.
  client.on('error', (error: Error) => {
    lastError = scrub(error.message, secrets);
  });
  client.on('close', () => {
    // A server that stopped closes the line without an error; the next connect attempt's error says more.
    lastError ??= 'the connection closed';
  });
  client.on('ready', () => {
    lastError = undefined;
  });

  const shown = (error: unknown): string => scrub(error instanceof Error ? error.message : String(error), secrets);
  const failure = (error: unknown, doing: string): KlymError => {
    if (error instanceof KlymError) return error;
    const message = shown(error);
    const name = error instanceof Error ? error.name : '';
    let text: string;
    if (/enableOfflineQueue|Connection is closed/.test(message)) {
      text = `is unreachable (${lastError ?? 'not connected'}), so Klym could not ${doing}; it reconnects by itself`;
    } else if (name === 'MaxRetriesPerRequestError' || /Command aborted|connection close/i.test(message)) {
      text = `lost its connection (${lastError ?? 'closed'}) before it answered: Klym asked it to ${doing}, which may or may not have been done`;
    } else if (/Command timed out/.test(message)) {
      text = `did not answer within ${options.commandTimeoutMs} ms: Klym asked it to ${doing}, which may or may not have been done`;
    } else {
      text = `failed to ${doing}: ${message}`;
    }
    return new KlymError('STORE_UNAVAILABLE', `The Redis task store at ${where} ${text}`);
  };

  try {
    await connected(client, options.connectTimeoutMs, () => lastError);
    await checkVersion(client);
  } catch (error) {
    client.disconnect();
    const reason = error instanceof KlymError ? error.message : shown(error);
    throw new KlymError('STORE_UNAVAILABLE', `The Redis task store at ${where} cannot be used: ${reason}`);
  }
  const warnings = await readSettings(client, shown);

  let closing: Promise<void> | undefined;
  return {
    client,
    where,
    warnings,
    failure,
    close: () =>
      (closing ??= (async () => {
        try {
          // A PING goes through the auto-pipeline behind every command sent before it; QUIT would not.
          await client.ping();
          await client.quit();
        } catch {
          // Redis is down or does not answer: nothing it would still take is waiting, so just drop the line.
        } finally {
          client.disconnect();
        }
      })()),
  };
}

/** Resolves on the connection's first `ready`; rejects after `timeoutMs`, or at once on an error waiting will not cure. */
async function connected(client: Redis, timeoutMs: number, lastError: () => string | undefined): Promise<void> {
  const { promise, resolve, reject } = Promise.withResolvers<void>();
  const timer = setTimeout(() => reject(new KlymError('STORE_UNAVAILABLE', `no connection within ${timeoutMs} ms (${lastError() ?? 'no answer'})`)), timeoutMs);
  const onError = (error: Error): void => {
    if (FATAL_AT_START.test(error.message)) reject(new KlymError('STORE_UNAVAILABLE', `it refused the connection: ${lastError() ?? error.message}`));
  };
  client.once('ready', resolve);
  client.on('error', onError);
  client.connect().catch(() => {
    // Reported through 'error'; ioredis goes on trying until the timer gives up.
  });
  try {
    await promise;
  } finally {
    clearTimeout(timer);
    client.off('ready', resolve);
    client.off('error', onError);
  }
}

async function checkVersion(client: Redis): Promise<void> {
  const info = await client.info('server').catch(() => '');
  const version = /redis_version:(\d+)\.(\d+)/.exec(info);
  // A server that hides INFO is taken at its word; a command it lacks fails the call that needs it.
  if (version === null) return;
  const [major, minor] = [Number(version[1]), Number(version[2])];
  if (major < MINIMUM_VERSION[0] || (major === MINIMUM_VERSION[0] && minor < MINIMUM_VERSION[1])) {
    throw new KlymError('STORE_UNAVAILABLE', `Klym needs Redis ${MINIMUM_VERSION.join('.')} or newer, and it is ${major}.${minor}`);
  }
}

/** The settings Klym needs, as warnings: what a restart or a full memory would cost. */
async function readSettings(client: Redis, shown: (error: unknown) => string): Promise<string[]> {
  const read = async (name: string): Promise<string | Error> => {
    try {
      const answer = (await client.config('GET', name)) as string[];
      return answer[1] ?? new Error('the server does not know it');
    } catch (error) {
      return new Error(shown(error));
    }
  };
  const [appendonly, policy] = await Promise.all([read('appendonly'), read('maxmemory-policy')]);
  const warnings: string[] = [];
  if (appendonly instanceof Error || policy instanceof Error) {
    const reason = (appendonly instanceof Error ? appendonly : (policy as Error)).message;
    warnings.push(`could not check Redis's appendonly and maxmemory-policy (CONFIG GET: ${reason}); Klym needs appendonly yes and maxmemory-policy noeviction`);
  }
  if (typeof appendonly === 'string' && appendonly !== 'yes') {
    warnings.push(
      `Redis has appendonly ${appendonly}: a restart of Redis loses the tasks, logs and queued work written since its last snapshot (Klym needs appendonly yes)`,
    );
  }
  if (typeof policy === 'string' && policy !== 'noeviction') {
    warnings.push(
      `Redis has maxmemory-policy ${policy}: when its memory is full it may delete tasks, logs or queued work (Klym needs maxmemory-policy noeviction)`,
    );
  }
  return warnings;
}
