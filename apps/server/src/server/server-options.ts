import { type SessionPool, type TaskBackendOptions, type TaskServiceOptions, type TaskStore, type UpstreamConfig, KlymError } from '@klym/core';
import { secretsOf } from '@klym/core/server';
import type { LoggingLevel } from '@modelcontextprotocol/server';
import { LOOPBACK, isLoopback } from './loopback.ts';
import { resolveOAuthOptions, type OAuthResourceOptions, type ResolvedOAuthOptions } from './oauth-options.ts';

export { isLoopback };

/**
 * Where the server reports what it does: one line (never a secret), with how severe it is (MCP's levels;
 * `info` when not given), and the line's facts as fields for a structured log (a request's `method`,
 * `route`, `status`, `durationMs`, `principal`).
 */
export type ServerLog = (line: string, level?: LoggingLevel, fields?: Readonly<Record<string, unknown>>) => void;

/** Defaults of the server's own options (`tasks` takes its from `@klym/core`'s `TASK_DEFAULTS`). */
export const SERVER_DEFAULTS = {
  host: '127.0.0.1',
  port: 8765,
  /** `klym worker`'s health endpoint. */
  workerPort: 8766,
  /** 1 MiB. */
  maxBodyBytes: 1_048_576,
  /** 30 min. */
  sessionIdleMs: 1_800_000,
} as const;

/**
 * The server's tasks: `@klym/core`'s task service options, named and defaulted as there (`maxConcurrent`,
 * `maxQueued`, `taskTimeoutMs`, `ttlMs`, `log`, `models`, `budget`s, `tools`, policies, `secrets`, …), handed
 * to `createTaskService` as they are, and the few the server itself decides: where tasks are kept and
 * queued (`store`, `artifactLimits`, `sharedQueue`) and where their runs execute (`runner`, `runnerThreads`, `runnerNiceness`).
 */
export interface ServerTaskOptions extends Omit<TaskServiceOptions, 'pool' | 'store' | 'onEvent'> {
  /**
   * Where tasks are kept: a store (closed by whoever created it), or a spec `openTaskBackend` opens at start
   * and the server closes after the task manager: `memory`, `sqlite:<path>` (a file, relative to the working
   * directory), or `redis://[user:password@]host:port/db` (`rediss://` for TLS), which also puts the queue
   * there (see `sharedQueue`). A `queue` given is used as it is.
   * @default 'memory'
   */
  readonly store?: TaskStore | string;
  /** Caps on the artifacts kept by the store opened from a spec (a store given has its own). @default the store's (see `createSqliteTaskStore`, …) */
  readonly artifactLimits?: TaskBackendOptions['artifacts'];
  /**
   * With a Redis `store` (`redis://…`), tasks wait on a BullMQ queue in the same Redis that every front and
   * worker shares; these tune how a dead worker's task is taken over (see `createBullmqTaskQueue`).
   * @default TASK_QUEUE_DEFAULTS
   */
  readonly sharedQueue?: TaskBackendOptions['sharedQueue'];
  /**
   * Where tasks' runs execute: `thread`, on a worker thread with its own pool over `upstreams` (so that
   * requests are answered while runs keep it busy; needs `upstreams`, not `pool`, and no `run`), or
   * `inline`, on the thread that serves requests. @default 'inline' (`klym serve` defaults to 'thread')
   */
  readonly runner?: 'thread' | 'inline';
  /**
   * With `runner: 'thread'`, how many runner threads the runs are spread over (`createThreadRunner`'s `threads`):
   * each has its own pool over `upstreams`, and an upstream's `pool.max` is their total.
   * @default the machine's cores less one, at least 1
   */
  readonly runnerThreads?: number;
  /**
   * With `runner: 'thread'`, the runner threads' nice value below the process's (`createThreadRunner`'s
   * `niceness`, 0-19): the front runs first when cores are short. @default 10
   */
  readonly runnerNiceness?: number;
}

/**
 * Everything Klym's server is built from: its own options, and its tasks' (`tasks`, core's task service
 * options with the server's store, queue and runner). The config file, env and CLI flags (`klym serve`)
 * are mapped onto this type; code may pass it directly.
 */
export interface KlymServerOptions {
  /** Upstream MCP servers, by name; a pool is opened over them and closed with the server. @default {} */
  readonly upstreams?: Readonly<Record<string, UpstreamConfig>>;
  /** An existing pool to serve instead of `upstreams`; the server does not close it. @default undefined */
  readonly pool?: SessionPool;
  /** The tasks: how many run at once, how long, on which models and budgets, where they are kept. @default {} (core's defaults, the memory store, runs inline) */
  readonly tasks?: ServerTaskOptions;
  /** Address to bind. A non-loopback address requires `auth` (`tokens` or `oauth`). @default '127.0.0.1' */
  readonly host?: string;
  /** Port to listen on; 0 picks a free one. @default 8765 */
  readonly port?: number;
  /**
   * Who may call. `tokens`: static bearer tokens, by principal (`{ grynya: '<token>' }`), never shown in output.
   * `oauth`: JWT access tokens of an authorization server, the principal from a claim, each operation behind a
   * scope (see {@link OAuthResourceOptions}); a token is tried as a static one first. `admins` names principals
   * of `tokens` who see every principal's tasks on the dashboard. Without `auth` every caller is `anonymous`.
   * @default undefined (no auth; `tokens`: {}, `admins`: [])
   */
  readonly auth?: { readonly tokens?: Readonly<Record<string, string>>; readonly admins?: readonly string[]; readonly oauth?: OAuthResourceOptions };
  /** Host names (no port) the `Host` header may name besides loopback (`localhost`, `127.0.0.1`, `::1`, always allowed) and the bound host; others get 403. @default [] */
  readonly allowedHosts?: readonly string[];
  /** Host names an `Origin` header may name besides loopback (always allowed); requests with another Origin get 403, requests without one pass. @default [] */
  readonly allowedOrigins?: readonly string[];
  /**
   * `GET /metrics` (Prometheus): with `token`, it takes only `Authorization: Bearer <token>` (never shown in
   * output); without, the same bearer tokens as the API (`auth`), or none where the API needs none.
   * @default {} (guarded like the API)
   */
  readonly metrics?: { readonly token?: string };
  /** Largest request body, in bytes; larger ones get 413. @default 1_048_576 */
  readonly maxBodyBytes?: number;
  /**
   * The A2A door (`/.well-known/agent-card.json`, `POST /a2a`): `url`, where clients reach `/a2a` as the card
   * names it (behind a proxy, the proxy's); `maxBlockMs`, the longest a `SendMessage` without
   * `returnImmediately` waits for its task's end. @default { url: the card request's origin + '/a2a', maxBlockMs: 60_000 }
   */
  readonly a2a?: { readonly url?: string; readonly maxBlockMs?: number };
  /** An MCP session (either transport) with no request for this long is closed. @default 1_800_000 */
  readonly sessionIdleMs?: number;
  /**
   * Where the server reports what it does: its own lines, and what upstreams log (`notifications/message`,
   * a stdio server's stderr) as `[upstream level] message`, each with its level to filter on.
   * @default writes every line to stderr
   */
  readonly log?: ServerLog;
}

/** {@link KlymServerOptions} with the server's own defaults applied. */
export interface ResolvedServerOptions extends KlymServerOptions {
  readonly auth?: { readonly tokens?: Readonly<Record<string, string>>; readonly admins?: readonly string[]; readonly oauth?: ResolvedOAuthOptions };
  readonly tasks: ServerTaskOptions;
  readonly host: string;
  readonly port: number;
  readonly allowedHosts: readonly string[];
  readonly allowedOrigins: readonly string[];
  readonly maxBodyBytes: number;
  readonly sessionIdleMs: number;
  readonly log: ServerLog;
}

const positive = (value: number): boolean => Number.isFinite(value) && value > 0;

function check(name: string, value: number | undefined, valid: (value: number) => boolean, expected: string): void {
  if (value !== undefined && !valid(value)) throw new KlymError('CONFIG_INVALID', `Expected \`${name}\` to be ${expected}, got ${value}`);
}

/**
 * Applies the server's defaults and checks its numbers (the task service checks its own).
 * @throws {KlymError} `CONFIG_INVALID` naming the option that is out of range.
 */
export function resolveServerOptions(options: KlymServerOptions): ResolvedServerOptions {
  check('port', options.port, (value) => Number.isInteger(value) && value >= 0 && value <= 65_535, 'an integer from 0 to 65535');
  check('maxBodyBytes', options.maxBodyBytes, positive, 'a positive number');
  check('sessionIdleMs', options.sessionIdleMs, positive, 'a positive number');
  for (const admin of options.auth?.admins ?? []) {
    if (!Object.hasOwn(options.auth?.tokens ?? {}, admin))
      throw new KlymError('CONFIG_INVALID', `Expected \`auth.admins\` to name principals of \`auth.tokens\`, got "${admin}"`);
  }
  const host = options.host ?? SERVER_DEFAULTS.host;
  const bound = host.replace(/^\[|\]$/g, '').toLowerCase();
  const extra = bound === '0.0.0.0' || bound === '::' ? [] : [bound];
  const port = options.port ?? SERVER_DEFAULTS.port;
  const { oauth, ...auth } = options.auth ?? {};
  return {
    ...options,
    auth: options.auth === undefined ? undefined : { ...auth, ...(oauth === undefined ? {} : { oauth: resolveOAuthOptions(oauth, host, port) }) },
    tasks: options.tasks ?? {},
    host,
    port,
    allowedHosts: [...new Set([...LOOPBACK, ...(options.allowedHosts ?? []), ...extra].map((name) => name.toLowerCase()))],
    allowedOrigins: [...new Set([...LOOPBACK, ...(options.allowedOrigins ?? [])].map((name) => name.toLowerCase()))],
    maxBodyBytes: options.maxBodyBytes ?? SERVER_DEFAULTS.maxBodyBytes,
    sessionIdleMs: options.sessionIdleMs ?? SERVER_DEFAULTS.sessionIdleMs,
    log: options.log ?? ((line) => process.stderr.write(`${line}\n`)),
  };
}

/**
 * Every secret the server holds, for whatever it shows (logs, errors, results, the dashboard): its bearer
 * tokens, the metrics token, the tasks' `secrets` and the providers' keys (core's `secretsOf`).
 */
export function serverSecrets(options: KlymServerOptions): readonly string[] {
  const tokens = [...Object.values(options.auth?.tokens ?? {}), options.metrics?.token];
  return secretsOf([...tokens, ...(options.tasks?.secrets ?? [])], options.tasks?.providers);
}
