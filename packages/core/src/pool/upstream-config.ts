import type { Transport } from '@modelcontextprotocol/client';
import { KlymError } from '../errors.ts';
import { resolveUpstreamAuth, type ResolvedUpstreamAuth, type UpstreamAuth } from './upstream-auth.ts';
import { assertUpstreamName } from './tool-name.ts';
import { UPSTREAM_DEFAULTS } from '../defaults.ts';

/** How Klym talks to an upstream MCP server. */
export type TransportKind = 'streamable-http' | 'sse' | 'stdio' | 'custom';

/** Which protocol revision the pool speaks to an upstream: see {@link UpstreamConfig.protocol}. */
export type UpstreamProtocol = 'auto' | '2025-11-25' | '2026-07-28';

/** One upstream MCP server: a URL (HTTP), a command (stdio), or a `connect` function (anything else). */
export interface UpstreamConfig {
  /** The server's URL, for HTTP transports: `http://grynya-mcp-server:8000/sse`. */
  readonly url?: string | URL;
  /**
   * The transport for `url`. `auto` follows the spec's backwards-compatibility probe: Streamable HTTP
   * first, legacy HTTP+SSE when that answers 4xx; the answer is remembered for later sessions.
   * @default 'auto' for a url, 'stdio' for a command
   */
  readonly transport?: 'auto' | 'streamable-http' | 'sse' | 'stdio';
  /**
   * The protocol revision to speak. `auto` probes with `server/discover` and speaks 2026-07-28 (stateless)
   * to an upstream that offers it, else falls back to `initialize` (2025-11-25 and older); the verdict is
   * remembered for later sessions. `2025-11-25` sends `initialize` alone; `2026-07-28` refuses an upstream
   * without it. Legacy SSE always speaks 2025-11-25. Over stdio the probe runs on a second, short-lived
   * server process (the SDK's way: some servers exit on an unknown first request), so `auto` is opt-in there.
   * @default 'auto' for a url, '2025-11-25' for a command
   */
  readonly protocol?: UpstreamProtocol;
  /**
   * Request headers sent to an HTTP upstream (bearer tokens, `Host`). A `Host` header is really sent,
   * unlike with Node's own `fetch`.
   */
  readonly headers?: Readonly<Record<string, string>>;
  /**
   * OAuth for an HTTP upstream: an access token from the `client_credentials` grant at the authorization
   * server `auth.issuer` (required; https, http only on loopback), the client authenticated with a secret or
   * a signed JWT (`private_key_jwt`), fetched on the first 401, renewed before it expires, and sent on every
   * request. The secret and the key never appear in errors or status. @default none: only `headers`
   */
  readonly auth?: UpstreamAuth;
  /** The command that starts a stdio server. */
  readonly command?: string;
  /** Arguments of `command`. @default [] */
  readonly args?: readonly string[];
  /**
   * Environment of the stdio child, on top of a minimal safe set (`PATH`, `HOME`, …): the rest of
   * Klym's environment, secrets included, is never passed on. @default {}
   */
  readonly env?: Readonly<Record<string, string>>;
  /** Working directory of the stdio child. @default the current directory */
  readonly cwd?: string;
  /** Opens a transport of any other kind (an in-memory server in tests, a WebSocket, …). */
  readonly connect?: () => Transport | Promise<Transport>;
  /**
   * Who shares a session. `shared`: every call of every task borrows any pooled session, one call at a
   * time — right for stateless tools (a graph query, a search). `task`: each task (each run) gets a session
   * of its own for its whole run, opened on first use, counted against `pool.max` (more tasks wait for one,
   * up to `timeouts.acquireMs`) and closed when the task ends — for an upstream that keeps state per
   * session (a browser, a shell, a logging level, subscriptions), which `shared` would leak between callers.
   * @default 'shared'
   */
  readonly sessionScope?: 'shared' | 'task';
  /**
   * The largest message the upstream may send, in bytes: a stdio frame, a JSON body, an SSE event. A larger
   * one fails the one call it answers with `UPSTREAM_MESSAGE_TOO_LARGE` (its size and this limit named),
   * without being held whole; the session and the other calls go on. @default 134_217_728 (128 MiB)
   */
  readonly maxMessageBytes?: number;
  /** How many sessions to keep. */
  readonly pool?: {
    /** Sessions opened at start-up and kept open. @default 1 */
    readonly min?: number;
    /** Most sessions at once, so most concurrent calls. @default 4, and 1 for stdio (several server processes writing one store lose data) */
    readonly max?: number;
    /** Most callers waiting for a session; one more is refused at once with `UPSTREAM_UNAVAILABLE`. @default 1_000 */
    readonly maxWaiting?: number;
  };
  /** The circuit breaker over connect attempts. */
  readonly breaker?: {
    /** Consecutive connect failures that open it. @default 3 */
    readonly failureThreshold?: number;
    /** Wait before the first half-open probe; doubles after each failed probe. @default 1_000 */
    readonly cooldownMs?: number;
    /** Longest wait between probes. @default 10_000 */
    readonly maxCooldownMs?: number;
  };
  /** Time limits, in milliseconds. */
  readonly timeouts?: {
    /** Connect plus `initialize`. @default 10_000 */
    readonly connectMs?: number;
    /** One request, when the caller gives no `timeoutMs`; progress notifications restart it. @default 60_000 */
    readonly requestMs?: number;
    /** Hard limit of one request, however much progress it reports. @default 600_000 */
    readonly maxTotalMs?: number;
    /** Waiting for a free session when all `max` are busy. @default 30_000 */
    readonly acquireMs?: number;
    /** A session idle this long is pinged before it is lent, and replaced if the ping fails. @default 30_000 */
    readonly idlePingMs?: number;
  };
}

/** An upstream's configuration with every default filled in. */
export interface ResolvedUpstreamConfig {
  readonly name: string;
  readonly transport: 'auto' | 'streamable-http' | 'sse' | 'stdio' | 'custom';
  readonly url: URL | undefined;
  readonly protocol: UpstreamProtocol;
  readonly headers: Readonly<Record<string, string>>;
  readonly auth: ResolvedUpstreamAuth | undefined;
  readonly command: string | undefined;
  readonly args: readonly string[];
  readonly env: Readonly<Record<string, string>>;
  readonly cwd: string | undefined;
  readonly connect: (() => Transport | Promise<Transport>) | undefined;
  readonly sessionScope: 'shared' | 'task';
  readonly min: number;
  readonly max: number;
  readonly maxWaiting: number;
  readonly connectMs: number;
  readonly requestMs: number;
  readonly maxTotalMs: number;
  readonly acquireMs: number;
  readonly idlePingMs: number;
  readonly maxMessageBytes: number;
  readonly breaker: { readonly failureThreshold: number; readonly cooldownMs: number; readonly maxCooldownMs: number };
}

/** Checks one upstream's options and fills in the defaults; throws `CONFIG_INVALID` naming what is wrong. */
export function resolveUpstreamConfig(name: string, config: UpstreamConfig): ResolvedUpstreamConfig {
  assertUpstreamName(name);
  const fail = (message: string): never => {
    throw new KlymError('CONFIG_INVALID', `Upstream "${name}": ${message}`, { upstream: name });
  };
  const kinds = [config.url, config.command, config.connect].filter((value) => value !== undefined).length;
  if (kinds !== 1) fail('expected exactly one of `url`, `command` or `connect`');

  let url: URL | undefined;
  if (config.url !== undefined) {
    url = URL.canParse(String(config.url)) ? new URL(String(config.url)) : undefined;
    if (url === undefined || !['http:', 'https:'].includes(url.protocol)) {
      fail(`expected \`url\` to be an http(s) URL, got ${JSON.stringify(String(config.url))}`);
    }
    if (config.transport === 'stdio') fail('`transport: "stdio"` needs a `command`, not a `url`');
    if (config.transport !== undefined && !['auto', 'streamable-http', 'sse'].includes(config.transport)) {
      fail(`expected \`transport\` to be "auto", "streamable-http" or "sse", got ${JSON.stringify(config.transport)}`);
    }
  }
  if (config.command !== undefined && config.transport !== undefined && config.transport !== 'stdio') {
    fail(`\`transport: "${config.transport}"\` needs a \`url\`, not a \`command\``);
  }
  const transport = config.connect ? 'custom' : config.command === undefined ? (config.transport ?? 'auto') : 'stdio';

  const protocol = config.protocol ?? (transport === 'stdio' ? '2025-11-25' : 'auto');
  if (!['auto', '2025-11-25', '2026-07-28'].includes(protocol))
    fail(`expected \`protocol\` to be "auto", "2025-11-25" or "2026-07-28", got ${JSON.stringify(protocol)}`);
  if (protocol === '2026-07-28' && transport === 'sse') fail('`protocol: "2026-07-28"` needs Streamable HTTP (or stdio): legacy SSE speaks 2025-11-25 only');

  let upstreamAuth: ResolvedUpstreamAuth | undefined;
  if (config.auth !== undefined) {
    if (url === undefined) fail('`auth` needs a `url`: OAuth is for HTTP upstreams');
    try {
      upstreamAuth = resolveUpstreamAuth(config.auth);
    } catch (error) {
      fail((error as Error).message);
    }
  }

  const sessionScope = config.sessionScope ?? 'shared';
  if (sessionScope !== 'shared' && sessionScope !== 'task') fail(`expected \`sessionScope\` to be "shared" or "task", got ${JSON.stringify(sessionScope)}`);

  const min = config.pool?.min ?? UPSTREAM_DEFAULTS.min;
  const max = config.pool?.max ?? (transport === 'stdio' ? UPSTREAM_DEFAULTS.maxStdio : UPSTREAM_DEFAULTS.max);
  const integer = (key: string, value: number, least: number): number => {
    if (!Number.isInteger(value) || value < least) fail(`expected \`${key}\` to be an integer ≥ ${least}, got ${value}`);
    return value;
  };
  integer('pool.min', min, 0);
  integer('pool.max', max, 1);
  if (min > max) fail(`expected \`pool.min\` (${min}) to be at most \`pool.max\` (${max})`);

  return {
    name,
    transport,
    url,
    protocol,
    headers: { ...config.headers },
    auth: upstreamAuth,
    command: config.command,
    args: [...(config.args ?? [])],
    env: { ...config.env },
    cwd: config.cwd,
    connect: config.connect,
    sessionScope,
    min,
    max,
    maxWaiting: integer('pool.maxWaiting', config.pool?.maxWaiting ?? UPSTREAM_DEFAULTS.maxWaiting, 0),
    connectMs: integer('timeouts.connectMs', config.timeouts?.connectMs ?? UPSTREAM_DEFAULTS.connectMs, 1),
    requestMs: integer('timeouts.requestMs', config.timeouts?.requestMs ?? UPSTREAM_DEFAULTS.requestMs, 1),
    maxTotalMs: integer('timeouts.maxTotalMs', config.timeouts?.maxTotalMs ?? UPSTREAM_DEFAULTS.maxTotalMs, 1),
    acquireMs: integer('timeouts.acquireMs', config.timeouts?.acquireMs ?? UPSTREAM_DEFAULTS.acquireMs, 1),
    idlePingMs: integer('timeouts.idlePingMs', config.timeouts?.idlePingMs ?? UPSTREAM_DEFAULTS.idlePingMs, 0),
    maxMessageBytes: integer('maxMessageBytes', config.maxMessageBytes ?? UPSTREAM_DEFAULTS.maxMessageBytes, 1),
    breaker: {
      failureThreshold: integer('breaker.failureThreshold', config.breaker?.failureThreshold ?? UPSTREAM_DEFAULTS.failureThreshold, 1),
      cooldownMs: integer('breaker.cooldownMs', config.breaker?.cooldownMs ?? UPSTREAM_DEFAULTS.cooldownMs, 1),
      maxCooldownMs: integer('breaker.maxCooldownMs', config.breaker?.maxCooldownMs ?? UPSTREAM_DEFAULTS.maxCooldownMs, 1),
    },
  };
}
