import { ARTIFACT_DEFAULTS, QUERY_DEFAULTS } from '@klym/core/artifacts';
import { WEBHOOK_EVENTS, TASK_DEFAULTS, TASK_QUEUE_DEFAULTS, WEBHOOK_DEFAULTS } from '@klym/core/server';
import { z } from 'zod';
import { isResourceUrl } from '../server/oauth-options.ts';
import { SERVER_DEFAULTS } from '../server/server-options.ts';
import { runSettingsShape } from './run-settings-shape.ts';
import { serverSchema } from './server-schema.ts';
import { milliseconds, mcpServerSchema, upstreamNameSchema, upstreamSchema } from './upstream-schema.ts';

// Every default of a task setting is core's (TASK_DEFAULTS), and of a server setting the server's (SERVER_DEFAULTS):
// defined once, so the config file, the server's options and the library cannot drift apart.
const positiveInt = z.number().int().positive();
const positiveMs = milliseconds.positive();
const patterns = z.array(z.string().min(1));

/** What the CLI keeps tasks in unless told otherwise: a file under the working directory (the library's default is `memory`). */
export const CLI_TASK_STORE = 'sqlite:.klym/tasks.db';

/** Where the CLI runs tasks unless told otherwise: on a thread of their own (the library's default is `inline`). */
export const CLI_TASK_RUNNER = 'thread';

/** Limits of one run; what is left out is unlimited. */
const budgetSchema = (defaults: { readonly maxSteps: number; readonly timeoutMs?: number }) =>
  z
    .strictObject({
      /** LLM steps. */
      maxSteps: positiveInt.default(defaults.maxSteps),
      /** Input plus output tokens. */
      maxTokens: positiveInt.optional(),
      /** Cost in USD, from `llm.prices`. */
      maxCostUsd: z.number().positive().optional(),
      /** Wall-clock time of the run, in milliseconds. */
      timeoutMs: defaults.timeoutMs === undefined ? positiveMs.optional() : positiveMs.default(defaults.timeoutMs),
    })
    .prefault({});

/** Limits of one principal's tasks; a limit left out is none of its own. */
const principalLimitsSchema = z.strictObject({
  /** Of its tasks, how many run at once, at most; the rest wait their turn (none is refused). @default no limit */
  maxRunning: positiveInt.optional(),
  /** Of its tasks, how many wait as `pending`, at most; one more start is refused (`QUOTA_EXCEEDED`, HTTP 429). @default no limit */
  maxQueued: positiveInt.optional(),
  /**
   * Tokens its runs may spend in a day (UTC), map calls included; counted in the task store, so across restarts.
   * Once spent, a start is refused (`QUOTA_EXCEEDED`, HTTP 429, `Retry-After` the day's turn), a waiting task
   * ends unstarted, and a run under way stops after its step (`finish_reason: budget:tokensPerDay`). @default no limit
   */
  maxTokensPerDay: positiveInt.optional(),
  /** USD its runs may spend in a day (UTC), at the models' prices (a model without one counts nothing); as `maxTokensPerDay`. @default no limit */
  maxUsdPerDay: z.number().positive().optional(),
});

/** MCP's log levels, least severe first (`logging.level`). */
export const LOG_LEVELS = ['debug', 'info', 'notice', 'warning', 'error', 'critical', 'alert', 'emergency'] as const;
/** One of {@link LOG_LEVELS}. */
export type LogLevel = (typeof LOG_LEVELS)[number];

/** Whether `Intl` knows `name` as a time zone. */
function isTimeZone(name: string): boolean {
  try {
    return new Intl.DateTimeFormat('en', { timeZone: name }).resolvedOptions().timeZone !== '';
  } catch {
    return false;
  }
}

const taskStoreSchema = z
  .string()
  .regex(
    /^(?:memory|sqlite:.+|rediss?:\/\/.+)$/s,
    'expected "memory", "sqlite:<path>" (e.g. sqlite:.klym/tasks.db) or "redis://host:port/db" (rediss:// for TLS)',
  );

/**
 * A webhook endpoint: where task events are POSTed, signed. A start names one by its key (`webhook: ops`); a
 * caller never gives a URL.
 */
/** A Standard Webhooks signing secret: `whsec_` and the base64 of 24 to 64 random bytes. */
const webhookSecret = z
  .string()
  .regex(/^whsec_[A-Za-z0-9+/]{32,}={0,2}$/, 'expected `whsec_` and the base64 of 24 to 64 random bytes, e.g. whsec_$(openssl rand -base64 32)');

const webhookSchema = z.strictObject({
  /** Where events are POSTed (http or https). Redirects are not followed. */
  url: z.url({ protocol: /^https?$/, error: 'expected an http(s) URL' }),
  /** The Standard Webhooks signing secret: `whsec_` and the base64 of 24 to 64 random bytes. Secret. */
  secret: webhookSecret,
  /**
   * The events it receives: `task.started`, `task.input_required` (its run asks its caller: `data.question`),
   * `task.completed`, `task.failed`, `task.cancelled`. @default ['task.input_required', 'task.completed', 'task.failed', 'task.cancelled']
   */
  events: z
    .array(z.enum(WEBHOOK_EVENTS))
    .min(1)
    .default([...WEBHOOK_DEFAULTS.events]),
  /** Receive the events of every task, not only of those whose start named this endpoint. @default false */
  all: z.boolean().default(false),
  /** How long a message is retried after its event, in milliseconds; then it is given up. @default 86_400_000 (24 h) */
  retryForMs: positiveMs.default(WEBHOOK_DEFAULTS.retryForMs),
  /** The delay before the first retry, in milliseconds; it doubles with each attempt, with jitter. @default 5_000 */
  retryDelayMs: positiveMs.default(WEBHOOK_DEFAULTS.retryDelayMs),
  /** The longest delay between two attempts, in milliseconds. @default 3_600_000 (1 h) */
  maxRetryDelayMs: positiveMs.default(WEBHOOK_DEFAULTS.maxRetryDelayMs),
  /** How long the receiver may take to answer, in milliseconds; a slower answer is a failed attempt. @default 10_000 */
  timeoutMs: positiveMs.default(WEBHOOK_DEFAULTS.timeoutMs),
});

const webhookNameSchema = z
  .string()
  .max(32, 'expected a webhook endpoint name of at most 32 characters')
  .regex(/^[A-Za-z0-9]+(?:[-_][A-Za-z0-9]+)*$/, 'expected a webhook endpoint name of letters and digits joined by single "-" or "_"');

const providerSchema = z.strictObject({
  apiKey: z.string().min(1).optional(),
  baseURL: z.url({ protocol: /^https?$/, error: 'expected an http(s) URL' }).optional(),
});

/**
 * Klym's whole configuration: the one source of truth for what each key may hold and its default.
 * Every object is strict: an unknown key is an error. See `resolveConfig` for where values come from.
 */
export const configObjectSchema = z.strictObject({
  /** Upstream MCP servers by name. @default {} */
  upstreams: z.record(upstreamNameSchema, upstreamSchema).default({}),
  /** The same, in the shape MCP desktop clients use, so a server list can be pasted as is. Merged into `upstreams`. @default {} */
  mcpServers: z.record(upstreamNameSchema, mcpServerSchema).default({}),
  llm: z
    .strictObject({
      /** The default model: `scripted` (offline, no key), `openai:gpt-4.1-mini`, `google:gemini-2.5-flash`, `compatible:llama3`. @default 'scripted' */
      model: z.string().min(1).default(TASK_DEFAULTS.models[0]),
      /** Further models a caller may choose, besides `model`. @default [] */
      models: z.array(z.string().min(1)).default([]),
      /** Base URL for the default model's provider (an OpenAI-compatible server for `compatible:`). */
      baseURL: z.url({ protocol: /^https?$/, error: 'expected an http(s) URL' }).optional(),
      /** API key for the default model's provider. Secret. */
      apiKey: z.string().min(1).optional(),
      /** Which OpenAI API to call: `responses` (`/v1/responses`) or `chat` (`/v1/chat/completions`). @default 'responses' */
      api: z.enum(['responses', 'chat']).optional(),
      /** Per-provider keys and base URLs, for when callers may choose models of several providers. */
      providers: z
        .strictObject({
          openai: providerSchema.extend({ api: z.enum(['responses', 'chat']).optional() }).prefault({}),
          google: providerSchema.prefault({}),
          compatible: providerSchema.prefault({}),
        })
        .prefault({}),
      /** The run settings of core's `RUN_SETTINGS` kept here: `temperature`, `prices`, `contextWindows`, `mapModel`, …, `maxRetries`. */
      ...runSettingsShape('llm'),
    })
    .prefault({}),
  /** The system prompt template; `{{tools}}` is replaced by a description of the tools. @default core's built-in prompt */
  systemPrompt: z.string().min(1).optional(),
  budget: z
    .strictObject({
      /** What a run gets when the caller asks for nothing. @default { maxSteps: 25 } */
      default: budgetSchema(TASK_DEFAULTS.defaultBudget),
      /** The most a caller may ask for. @default { maxSteps: 100, timeoutMs: 1_800_000 } */
      max: budgetSchema(TASK_DEFAULTS.maxBudget),
    })
    .prefault({}),
  tasks: z
    .strictObject({
      /**
       * Tasks running at once in this process; more wait as `pending`. With a Redis store, 0 makes `klym serve` a
       * front only: it starts, reads and cancels tasks, and `klym worker` processes run them. @default 4
       */
      concurrency: z.number().int().min(0).default(TASK_DEFAULTS.concurrency),
      /** Tasks waiting as `pending` at most (with a Redis store, across every front); one more is refused (`TASK_QUEUE_FULL`). @default 1_000 */
      maxQueued: positiveInt.default(TASK_DEFAULTS.maxQueued),
      /**
       * Limits of each principal's tasks (`maxRunning`, `maxQueued`, `maxTokensPerDay`, `maxUsdPerDay`), and of some principals by name in `overrides`
       * (`{ batch: { maxQueued: 500 } }`), each key of an override replacing the default's. Whatever the limits,
       * waiting tasks start in fair turns between principals. @default none: no principal has limits of its own
       */
      perPrincipal: principalLimitsSchema
        .extend({
          /** Limits of principals by name (a token's name, an OAuth subject). @default {} */
          overrides: z.record(z.string().min(1), principalLimitsSchema).optional(),
        })
        .optional(),
      /** How long a finished task is kept, in milliseconds. @default 3_600_000 (1 h) */
      ttlMs: positiveMs.default(TASK_DEFAULTS.ttlMs),
      /** Bytes of log kept per task; older entries are dropped with a marker. @default 262_144 (256 KiB) */
      logMaxBytes: z.number().int().min(1_024).default(TASK_DEFAULTS.logMaxBytes),
      /** Run-time limit of one task, in milliseconds, across restarts. @default 1_800_000 (30 min) */
      timeoutMs: positiveMs.default(TASK_DEFAULTS.timeoutMs),
      /** On shutdown, how long running tasks may finish before they are cancelled. @default 10_000 */
      shutdownGraceMs: milliseconds.default(TASK_DEFAULTS.shutdownGraceMs),
      /**
       * Where tasks are kept: `memory` (lost on restart), `sqlite:<path>` (a file relative to the working directory, one
       * process), or `redis://[user:password@]host:port/db` (`rediss://` for TLS), shared by many fronts and workers.
       * @default 'sqlite:.klym/tasks.db'
       */
      store: taskStoreSchema.default(CLI_TASK_STORE),
      /**
       * Where tasks' runs execute: `thread`, on a worker thread of their own, so that polls and starts are answered
       * while runs keep it busy; or `inline`, on the thread that serves requests. @default 'thread'
       */
      runner: z.enum(['thread', 'inline']).default(CLI_TASK_RUNNER),
      /**
       * With `runner: thread`, how many runner threads the runs are spread over (each to the least busy), so that one
       * task's synchronous work holds up only the runs on its own thread. Each has its own session pool: an upstream's
       * `pool.max` is the total over them, so there are never more threads than the smallest `pool.max` (logged when
       * that makes fewer). @default the machine's cores less one, at least 1
       */
      runnerThreads: positiveInt.optional(),
      /**
       * With `runner: thread`, how many steps below the process's priority the runner threads run (their nice value,
       * 0-19; Linux): when cores are short, the front that answers polls runs first. On a machine shared with other
       * busy processes, a high value also yields the runs to those (at 10, a tenth of a core's share beside one
       * process at 0); 0 runs them as the process does. @default 10
       */
      runnerNiceness: z.number().int().min(0).max(19).optional(),
      /** Whether a task that was running when Klym stopped resumes from its last step on restart; `false` ends it as `error` (`TASK_INTERRUPTED`). @default true */
      resumeOnRestart: z.boolean().default(TASK_DEFAULTS.resumeOnRestart),
      /** Whether a task's model may ask its caller a question (`klym__ask_caller`) and wait for the answer; a start may turn it off (`ask_caller: false`). @default true */
      askCaller: z.boolean().default(TASK_DEFAULTS.askCaller),
      /** How long a task waits for its caller's answer, in milliseconds; then it ends as `error` (`INPUT_TIMEOUT`). @default 86_400_000 (a day) */
      inputTimeoutMs: z.number().int().positive().default(TASK_DEFAULTS.inputTimeoutMs),
      /**
       * With a Redis store: how long a worker's lock on a task lasts unless renewed (every half of it). A worker that
       * died has its task taken over by another within about `lockDurationMs` + 2 × `stalledIntervalMs` (50 s). @default 30_000
       */
      lockDurationMs: positiveMs.default(TASK_QUEUE_DEFAULTS.lockDurationMs),
      /** With a Redis store: how often workers look for tasks whose worker stopped renewing its lock. @default 10_000 */
      stalledIntervalMs: positiveMs.default(TASK_QUEUE_DEFAULTS.stalledIntervalMs),
    })
    .prefault({}),
  /** Tool results kept whole as artifacts, in the task store. */
  artifacts: z
    .strictObject({
      /**
       * Bytes of artifacts the task store keeps in all; past it, a new one first drops the artifacts of the tasks
       * that finished first (the tasks stay), and is refused (`ARTIFACT_LIMIT`) when only running tasks' are left.
       * @default 8_589_934_592 (8 GiB) with a SQLite store, 2_147_483_648 (2 GiB) with Redis, a quarter of the heap's limit in memory
       */
      maxBytes: positiveInt.optional(),
      /** Bytes of artifacts one task keeps at most; one more is refused (`ARTIFACT_LIMIT`), which its model reads. @default 1_073_741_824 (1 GiB) */
      maxBytesPerTask: positiveInt.default(ARTIFACT_DEFAULTS.maxBytesPerTask),
      /** SQL over a task's artifacts (`klym__query_artifact`, `query_task_artifact`), in a DuckDB of its own per task. */
      query: z
        .strictObject({
          /**
           * Memory one task's DuckDB may use, in MiB; a query past it fails (`QUERY_FAILED`) naming the limit, and its
           * query process is killed past it plus 256 MiB as the OS counts it. @default 512
           */
          memoryMiB: positiveInt.default(QUERY_DEFAULTS.memoryMiB),
          /** Threads one task's DuckDB may use. @default 2 */
          threads: positiveInt.default(QUERY_DEFAULTS.threads),
          /** Time one query may take, waiting its turn included, in milliseconds; past it, it is interrupted, its process killed if need be (`QUERY_FAILED`). @default 30_000 */
          timeoutMs: positiveMs.default(QUERY_DEFAULTS.timeoutMs),
          /** Rows of one answer counted at most; past it the answer says "more than". @default 1_000_000 */
          maxRows: positiveInt.default(QUERY_DEFAULTS.maxRows),
          /** Query processes at most: DuckDB runs in them, never in Klym's own. @default 2 */
          processes: positiveInt.default(QUERY_DEFAULTS.processes),
          /** Queries at once in one query process; the others wait their turn inside their own `timeoutMs`. @default 1 */
          maxConcurrent: positiveInt.default(QUERY_DEFAULTS.maxConcurrent),
        })
        .prefault({}),
    })
    .prefault({}),
  /** Which upstream tools tasks may call; a caller can only narrow this. `*` matches any run of characters. */
  tools: z
    .strictObject({
      /** @default every tool */
      allow: patterns.optional(),
      /** @default [] */
      deny: patterns.optional(),
      /** A named policy (`read-only`, or one from `policies`). @default none */
      policy: z.string().min(1).optional(),
      /**
       * Tools whose every call in a task waits for the caller's approval; a caller may add its own, never remove
       * these. `grynya__add_node` here makes the result's write-back wait too. @default []
       */
      approval: patterns.optional(),
    })
    .prefault({}),
  /** The run settings of core's `RUN_SETTINGS` kept at the top: `policies`, `readOnlyTools`. */
  ...runSettingsShape(''),
  /** Webhook endpoints by name, told of task events (signed, retried, at least once). @default {} */
  webhooks: z.record(webhookNameSchema, webhookSchema).default({}),
  /** Writing each task's result into the graph as an `Analysis` node linked to its day. */
  writeBack: z
    .strictObject({
      /** Write back unless the caller says otherwise. @default false */
      enabled: z.boolean().default(false),
      /** The upstream with grynya's `add_node`. @default 'grynya' */
      upstream: upstreamNameSchema.default('grynya'),
      /** The IANA time zone whose calendar date names the day node (`d_YYYY_MM_DD`), e.g. `Europe/Kyiv`. @default 'UTC' */
      timeZone: z.string().refine(isTimeZone, 'expected an IANA time zone such as "UTC" or "Europe/Kyiv"').default('UTC'),
    })
    .prefault({}),
  logging: z
    .strictObject({
      /** Least severe level logged (MCP levels): the server's own lines and what upstreams log. @default 'info' */
      level: z.enum(LOG_LEVELS).default('info'),
      /** `stderr`, or a file path to append to. @default 'stderr' */
      destination: z.string().min(1).default('stderr'),
      /** `json` (one object a line), `pretty` (readable text), or `auto`: pretty on a terminal's stderr, else JSON. @default 'auto' */
      format: z.enum(['json', 'pretty', 'auto']).default('auto'),
    })
    .prefault({}),
  /** `GET /metrics` (Prometheus) of `klym serve` and of each `klym worker`'s health port. */
  metrics: z
    .strictObject({
      /** The bearer token `/metrics` takes instead of `server.tokens` (a scraper needs no principal). Secret. @default none: guarded like the API */
      token: z.string().min(16, 'expected a token of at least 16 characters').optional(),
    })
    .prefault({}),
  server: serverSchema,
  /** A2A 1.0 (`/.well-known/agent-card.json`, `POST /a2a`), beside MCP: the same tasks, bearer tokens and OAuth. @default {} */
  a2a: z
    .strictObject({
      /** The URL clients reach `/a2a` at, as the Agent Card names it (behind a proxy, the proxy's). @default the card request's origin + '/a2a' */
      url: z.string().refine(isResourceUrl, 'expected an http(s) URL without a fragment').optional(),
      /** The longest a `SendMessage` without `returnImmediately` waits for its task's end, in milliseconds. @default 60_000 */
      maxBlockMs: positiveMs.optional(),
      /**
       * Where callers may have A2A push notifications sent; non-empty turns them on (the card's `pushNotifications`).
       * An entry is `*` (any http(s) URL on a public host: never loopback, private or link-local, by address or by
       * name) or a URL: a push URL matches it with the same origin and a path at or below its path
       * (`https://hooks.example.com/a2a` admits `/a2a/x`, not `/a2a-x`). A loopback or private host is admitted
       * only by an entry naming it. @default [] (no push notifications)
       */
      pushAllow: z
        .array(
          z.string().refine((entry) => {
            const url = entry === '*' || !URL.canParse(entry) ? undefined : new URL(entry);
            return (
              entry === '*' ||
              (url !== undefined && /^https?:$/.test(url.protocol) && url.username === '' && url.password === '' && url.search === '' && url.hash === '')
            );
          }, 'expected "*" or an http(s) URL without query, fragment or credentials'),
        )
        .optional(),
      /** How push notifications are delivered, as a webhook endpoint's events are (through the same outbox, retried, logged). @default the webhooks' defaults, unsigned */
      pushDelivery: z
        .strictObject({
          /** A Standard Webhooks secret to sign each push with, for receivers who hold it: `whsec_` and the base64 of 24 to 64 random bytes. Secret. @default unsigned */
          secret: webhookSecret.optional(),
          /** How long a push is retried after its event, in milliseconds; then it is given up. @default 86_400_000 (24 h) */
          retryForMs: positiveMs.optional(),
          /** The delay before the first retry, in milliseconds; it doubles with each attempt, with jitter. @default 5_000 */
          retryDelayMs: positiveMs.optional(),
          /** The longest delay between two attempts, in milliseconds. @default 3_600_000 (1 h) */
          maxRetryDelayMs: positiveMs.optional(),
          /** How long a receiver may take to answer, in milliseconds. @default 10_000 */
          timeoutMs: positiveMs.optional(),
        })
        .optional(),
    })
    .optional(),
  /** `klym worker`: it serves only `GET /healthz`, on its own address. */
  worker: z
    .strictObject({
      /** Address of the health endpoint. @default '127.0.0.1' */
      host: z.string().min(1).default(SERVER_DEFAULTS.host),
      /** Port of the health endpoint; 0 picks a free one. @default 8766 */
      port: z.number().int().min(0).max(65_535).default(SERVER_DEFAULTS.workerPort),
    })
    .prefault({}),
});

/** The configuration as validated, before `mcpServers` is merged into `upstreams`. */
export type ParsedConfig = z.output<typeof configObjectSchema>;

type DeepReadonly<T> = T extends (infer Item)[] ? readonly DeepReadonly<Item>[] : T extends object ? { readonly [Key in keyof T]: DeepReadonly<T[Key]> } : T;

/** Klym's effective configuration: every default filled in, `mcpServers` merged into `upstreams`. */
export type KlymConfig = DeepReadonly<Omit<ParsedConfig, 'mcpServers'>>;
