import { z } from 'zod';
import { ARTIFACT_DEFAULTS, CODE_DEFAULTS, DEFAULT_MAX_RETRIES, MAX_TIMER_MS } from '../defaults.ts';
import type { RunSettings } from './types.ts';

/**
 * The settings of a run that each task sets for itself, not its service: the prompt and conversation; the
 * model, system prompt, tools and budget its request chooses within the service's limits; the secrets and
 * checkpoint its manager adds; whether it may ask its caller (`askCaller`, the manager's option narrowed by the
 * request), and that its calls wait for approvals (`approvals`, always on for a task); and `toolTimeoutMs`, which a task leaves to each upstream's `timeouts.requestMs`.
 */
export type PerTaskSetting = keyof Pick<
  RunSettings,
  'prompt' | 'messages' | 'model' | 'systemPrompt' | 'tools' | 'budget' | 'secrets' | 'resume' | 'toolTimeoutMs' | 'askCaller' | 'approvals'
>;

/**
 * The settings a task service gives every task's run as they are: {@link RunSettings} but those each task sets
 * for itself. A new option of `runAgent` lands here unless it is wired or set per task, and {@link RUN_SETTINGS}
 * must then have it.
 */
export type ServiceRunSettings = Omit<RunSettings, PerTaskSetting>;

/**
 * One row of {@link RUN_SETTINGS}: the key of Klym's config file that holds the setting, and what that key may
 * hold, its default there included. A setting without `schema` is built by the server from several keys
 * (`config` names the main one), with a builder of its own that the server's types require.
 */
export interface RunSettingSpec<Value> {
  /** A top-level key (`policies`) or one of the `llm` section (`llm.prices`); the config holds it under that name. */
  readonly config: string;
  /** Validates the config key, whose value is then the setting as it is. */
  readonly schema?: z.ZodType<Value>;
}

/** A table of run settings: every key of `Settings`, none besides, each with a schema whose output fits the option. */
export type RunSettingsTable<Settings> = { readonly [Key in keyof Settings]-?: RunSettingSpec<Settings[Key]> };

const patterns = z.array(z.string().min(1));

/**
 * Every run setting a task service gives each task's run as it is, in one table: `createTaskService` takes
 * these keys among its options and hands them to every run, and the server's config holds each under
 * `config` (its schema and env variable follow from it: `llm.mapModel`, `KLYM_LLM_MAP_MODEL`) and maps it onto
 * that option. Adding a setting is its field in `RunAgentOptions` and a row here; the compiler refuses a
 * table that lacks one of {@link ServiceRunSettings}, or whose schema yields what the option does not take.
 * The rows of one config section keep the order the config file shows them in.
 */
export const RUN_SETTINGS = {
  /** Keys and base URLs by provider: `llm.providers`, with `llm.apiKey`, `llm.baseURL` and `llm.api` for the default model's. */
  providers: { config: 'llm.providers' },
  /** Sampling temperature. @default the provider's */
  temperature: { config: 'llm.temperature', schema: z.number().min(0).max(2).optional() },
  /** USD per million tokens by model (`openai:gpt-4.1-mini`); a model without a price has no cost budget. @default {} */
  prices: {
    config: 'llm.prices',
    schema: z.record(z.string().min(1), z.strictObject({ inputPerMillion: z.number().nonnegative(), outputPerMillion: z.number().nonnegative() })).default({}),
  },
  /**
   * Context windows in tokens by model (`openai:gpt-4.1-mini`, or the model id alone), for a model Klym does not
   * know (it gives those 32,768) or to correct a built-in one. A request that would not fit is never sent. @default {}
   */
  contextWindows: { config: 'llm.contextWindows', schema: z.record(z.string().min(1), z.number().int().positive()).default({}) },
  /** The model `klym__map_artifact` calls on each chunk of an artifact (a cheaper one, say). @default the task's model */
  mapModel: { config: 'llm.mapModel', schema: z.string().min(1).optional() },
  /** `klym__map_artifact`'s model calls under way at once, per map. @default 4 */
  mapConcurrency: { config: 'llm.mapConcurrency', schema: z.number().int().positive().default(ARTIFACT_DEFAULTS.mapConcurrency) },
  /** Tokens one `klym__map_artifact` call may send at most, whatever the model's window (at most half of it). @default 32000 */
  mapChunkTokens: { config: 'llm.mapChunkTokens', schema: z.number().int().positive().default(ARTIFACT_DEFAULTS.mapChunkTokens) },
  /** A tool result of more tokens than this is kept as an artifact instead of sent to the model. @default a tenth of the model's context window */
  artifactThresholdTokens: { config: 'llm.artifactThresholdTokens', schema: z.number().int().positive().optional() },
  /** The provider's own retries of 408/409/429/5xx and network failures, with backoff. @default 2 */
  maxRetries: { config: 'llm.maxRetries', schema: z.number().int().nonnegative().default(DEFAULT_MAX_RETRIES) },
  /** Each enabled upstream's `tools`: allow/deny over its own tool names, read-only tools, its probe. */
  upstreamTools: { config: 'upstreams.<name>.tools' },
  /** Named policies beyond the built-in `read-only`. @default {} */
  policies: {
    config: 'policies',
    schema: z
      .record(
        z.string().regex(/^[A-Za-z0-9_-]+$/, 'expected a policy name of letters, digits, "-" and "_"'),
        z.strictObject({ allow: patterns.optional(), deny: patterns.optional(), readOnly: z.boolean().optional() }),
      )
      .default({}),
  },
  /** Tools (namespaced patterns) counted as read-only besides those annotated `readOnlyHint`. @default [] */
  readOnlyTools: { config: 'readOnlyTools', schema: patterns.default([]) },
  /** Limits of `klym__run_code`'s programs. */
  code: {
    config: 'code',
    schema: z
      .strictObject({
        /** A program's heap, in MiB; past it the program fails, naming this key. @default 64 */
        memoryMiB: z.number().int().positive().max(4_096).default(CODE_DEFAULTS.memoryMiB),
        /** Wall-clock limit of one program, its host calls included, in milliseconds. @default 60000 */
        timeoutMs: z.number().int().positive().max(MAX_TIMER_MS).default(CODE_DEFAULTS.timeoutMs),
        /** Rows one `sql()` of a program answers at most. @default 10000 */
        maxRows: z.number().int().positive().default(CODE_DEFAULTS.maxRows),
      })
      .prefault({}),
  },
} as const satisfies RunSettingsTable<ServiceRunSettings>;

/** The keys of {@link RUN_SETTINGS}: the options a task service picks from its own for every task's run. */
export const RUN_SETTING_KEYS = Object.keys(RUN_SETTINGS) as readonly (keyof ServiceRunSettings)[];
