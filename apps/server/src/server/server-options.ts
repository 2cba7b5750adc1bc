import {
  KlymError,
  type AgentBudget,
  type AgentRunner,
  type BoundedLogOptions,
  type ModelPrice,
  type ModelProviders,
  type SessionPool,
  type TaskRequest,
  type TaskRunDefaults,
  type TaskStore,
  type UpstreamConfig,
  type UpstreamToolRules,
  type WriteBackOptions,
} from '@klym/core';

// Tool selection and policy types, as the task API takes them (the agent module does not export them by name).
type ToolSelection = NonNullable<TaskRequest['tools']>;
type ToolPolicy = NonNullable<TaskRunDefaults['policies']>[string];

/**
 * Everything Klym's server is built from. The config file, env and CLI flags (`klym serve`) are mapped
 * onto this type; code may pass it directly.
 */
export interface KlymServerOptions {
  /** Upstream MCP servers, by name; a pool is opened over them and closed with the server. @default {} */
  readonly upstreams?: Readonly<Record<string, UpstreamConfig>>;
  /** An existing pool to serve instead of `upstreams`; the server does not close it. @default undefined */
  readonly pool?: SessionPool;
  /** Address to bind. A non-loopback address requires `auth.tokens`. @default '127.0.0.1' */
  readonly host?: string;
  /** Port to listen on; 0 picks a free one. @default 8765 */
  readonly port?: number;
  /** Bearer tokens, by principal: `{ grynya: '<token>' }`. Without it every caller is `anonymous`. @default undefined (no auth) */
  readonly auth?: { readonly tokens: Readonly<Record<string, string>> };
  /** Host names (no port) the `Host` header may name besides loopback (`localhost`, `127.0.0.1`, `::1`, always allowed) and the bound host; others get 403. @default [] */
  readonly allowedHosts?: readonly string[];
  /** Host names an `Origin` header may name besides loopback (always allowed); requests with another Origin get 403, requests without one pass. @default [] */
  readonly allowedOrigins?: readonly string[];
  /** Largest request body, in bytes; larger ones get 413. @default 1_048_576 */
  readonly maxBodyBytes?: number;
  /** An MCP session (either transport) with no request for this long is closed. @default 1_800_000 */
  readonly sessionIdleMs?: number;
  /** The models a caller may name in `model`; the first is the default. @default ['scripted'] */
  readonly models?: readonly string[];
  /** Provider keys and base URLs for those models (never shown to callers). @default {} */
  readonly providers?: ModelProviders;
  /** The model provider's own retries of failed calls. @default 2 */
  readonly maxRetries?: number;
  /** Sampling temperature of tasks' models. @default the provider's */
  readonly temperature?: number;
  /** Rules per upstream (by name): allow/deny over its own tool names, read-only tools, the self-check's probe. @default {} */
  readonly upstreamTools?: Readonly<Record<string, UpstreamToolRules>>;
  /** Further strings never to show in logs, errors or task status (upstream credentials); tokens and provider keys are always included. @default [] */
  readonly secrets?: readonly string[];
  /** Prices by model, for the cost budget. @default {} */
  readonly prices?: Readonly<Record<string, ModelPrice>>;
  /** The tools every task is limited to; a caller's `tools` can only narrow it. @default every tool */
  readonly tools?: ToolSelection;
  /** Named tool policies a caller may pick, besides the built-in `read-only`. @default {} */
  readonly policies?: Readonly<Record<string, ToolPolicy>>;
  /** Tools (namespaced patterns) that count as read-only besides those annotated `readOnlyHint`. @default [] */
  readonly readOnlyTools?: readonly string[];
  /** Default system prompt of tasks (may hold `{{tools}}`). @default runAgent's built-in prompt */
  readonly systemPrompt?: string;
  /** Budget of a task that asks for none. @default { maxSteps: 25 } */
  readonly defaultBudget?: AgentBudget;
  /** The most a caller may ask for; larger asks are capped. @default { maxSteps: 100, timeoutMs: 1_800_000 } */
  readonly maxBudget?: AgentBudget;
  /** Tasks running at once; more wait as `pending`. @default 4 */
  readonly maxConcurrentTasks?: number;
  /** Tasks waiting as `pending` at most; one more is refused with `TASK_QUEUE_FULL` (HTTP 429 on REST). @default 1_000 */
  readonly maxQueuedTasks?: number;
  /** Wall-clock limit of one task (`TASK_TIMEOUT`). @default 1_800_000 */
  readonly taskTimeoutMs?: number;
  /** How long a finished task stays visible. @default 3_600_000 */
  readonly taskTtlMs?: number;
  /** Bounds of each task's log. @default { maxBytes: 262_144, maxEntryBytes: 4_096 } */
  readonly taskLog?: BoundedLogOptions;
  /** Where tasks are kept. @default in memory */
  readonly taskStore?: TaskStore;
  /** Writing results into grynya's graph (`record_result`). @default { upstream: 'grynya', byDefault: false } */
  readonly writeBack?: WriteBackOptions;
  /** On shutdown, how long running tasks may finish before they are cancelled. @default 10_000 */
  readonly shutdownGraceMs?: number;
  /** Runs a task's agent; tests inject their own. @default runAgent of @klym/core */
  readonly run?: AgentRunner;
  /** Where the server reports what it does (never a secret). @default writes to stderr */
  readonly log?: (line: string) => void;
}

/** {@link KlymServerOptions} with defaults applied. */
export interface ResolvedServerOptions extends KlymServerOptions {
  readonly host: string;
  readonly port: number;
  readonly allowedHosts: readonly string[];
  readonly allowedOrigins: readonly string[];
  readonly maxBodyBytes: number;
  readonly sessionIdleMs: number;
  readonly models: readonly string[];
  readonly defaultBudget: AgentBudget;
  readonly maxBudget: AgentBudget;
  readonly shutdownGraceMs: number;
  readonly log: (line: string) => void;
}

const LOOPBACK = ['localhost', '127.0.0.1', '::1'];

/** Whether `host` is a loopback address or name. */
export function isLoopback(host: string): boolean {
  const name = host.replace(/^\[|\]$/g, '').toLowerCase();
  return LOOPBACK.includes(name) || /^127\.\d+\.\d+\.\d+$/.test(name);
}

const positive = (value: number): boolean => Number.isFinite(value) && value > 0;

function check(name: string, value: number | undefined, valid: (value: number) => boolean, expected: string): void {
  if (value !== undefined && !valid(value)) throw new KlymError('CONFIG_INVALID', `Expected \`${name}\` to be ${expected}, got ${value}`);
}

/**
 * Applies defaults and checks the numbers.
 * @throws {KlymError} `CONFIG_INVALID` naming the option that is out of range.
 */
export function resolveServerOptions(options: KlymServerOptions): ResolvedServerOptions {
  check('port', options.port, (value) => Number.isInteger(value) && value >= 0 && value <= 65_535, 'an integer from 0 to 65535');
  check('maxBodyBytes', options.maxBodyBytes, positive, 'a positive number');
  check('sessionIdleMs', options.sessionIdleMs, positive, 'a positive number');
  check('shutdownGraceMs', options.shutdownGraceMs, (value) => Number.isFinite(value) && value >= 0, 'zero or more');
  const host = options.host ?? '127.0.0.1';
  const bound = host.replace(/^\[|\]$/g, '').toLowerCase();
  const extra = bound === '0.0.0.0' || bound === '::' ? [] : [bound];
  return {
    ...options,
    host,
    port: options.port ?? 8765,
    allowedHosts: [...new Set([...LOOPBACK, ...(options.allowedHosts ?? []), ...extra].map((name) => name.toLowerCase()))],
    allowedOrigins: [...new Set([...LOOPBACK, ...(options.allowedOrigins ?? [])].map((name) => name.toLowerCase()))],
    maxBodyBytes: options.maxBodyBytes ?? 1_048_576,
    sessionIdleMs: options.sessionIdleMs ?? 1_800_000,
    models: options.models !== undefined && options.models.length > 0 ? options.models : ['scripted'],
    defaultBudget: options.defaultBudget ?? { maxSteps: 25 },
    maxBudget: options.maxBudget ?? { maxSteps: 100, timeoutMs: 1_800_000 },
    shutdownGraceMs: options.shutdownGraceMs ?? 10_000,
    log: options.log ?? ((line) => process.stderr.write(`${line}\n`)),
  };
}
