import { readFileSync } from 'node:fs';
import path from 'node:path';
import {
  KlymError,
  type AgentBudget,
  type ModelProviders,
  type RunSettings,
  type TaskServiceOptions,
  type UpstreamConfig,
  type UpstreamToolRules,
} from '@klym/core';
import { RUN_SETTINGS, secretsOf, upstreamSecrets } from '@klym/core/server';
import { a2aPush } from '@klym/core/a2a';
import { defaultResource } from '../server/oauth-options.ts';
import type { KlymServerOptions } from '../server/server-options.ts';
import { providerOf } from './cross-check.ts';
import type { KlymConfig } from './schema.ts';

/** The upstreams the pool opens: every configured one but those marked `disabled`, a `privateKeyFile` read. */
export function poolUpstreams(config: KlymConfig): Record<string, UpstreamConfig> {
  return Object.fromEntries(
    Object.entries(config.upstreams)
      .filter(([, upstream]) => upstream.disabled !== true)
      .map(([name, { disabled: _disabled, tools: _tools, auth: _auth, ...upstream }]) => {
        const auth = upstreamAuth(name, config.upstreams[name]);
        return [name, { ...upstream, ...(auth === undefined ? {} : { auth }) } as UpstreamConfig];
      }),
  );
}

/**
 * An upstream's `auth` as the pool takes it: a `privateKeyFile` read into `privateKey`.
 * @throws {KlymError} `CONFIG_INVALID` naming the key and the file when it cannot be read.
 */
function upstreamAuth(name: string, upstream: KlymConfig['upstreams'][string] | undefined): UpstreamConfig['auth'] {
  const auth = upstream?.auth;
  if (auth?.type !== 'private_key_jwt') return auth;
  const { privateKeyFile, privateKey, ...rest } = auth;
  if (privateKeyFile === undefined) return { ...rest, privateKey: privateKey as string };
  try {
    return { ...rest, privateKey: readFileSync(privateKeyFile, 'utf8') };
  } catch (error) {
    const why = (error as NodeJS.ErrnoException).code ?? 'unreadable';
    throw new KlymError('CONFIG_INVALID', `upstreams.${name}.auth.privateKeyFile: cannot read ${JSON.stringify(privateKeyFile)} (${why})`, {
      upstream: name,
      cause: error,
    });
  }
}

/** Each enabled upstream's tool rules (allow/deny over its own tool names, read-only tools, the self-check's probe). */
export function upstreamToolRules(config: KlymConfig): Record<string, UpstreamToolRules> {
  return Object.fromEntries(
    Object.entries(config.upstreams).flatMap(([name, upstream]) =>
      upstream.disabled === true || upstream.tools === undefined ? [] : [[name, upstream.tools as UpstreamToolRules]],
    ),
  );
}

/**
 * Provider keys and base URLs: `llm.providers`, with `llm.apiKey`, `llm.baseURL` and `llm.api` applied
 * to the provider of the default model `llm.model`.
 */
export function modelProviders(config: KlymConfig): ModelProviders {
  const { openai, google, compatible } = config.llm.providers;
  const own = providerOf(config.llm.model);
  const overlay = (provider: keyof ModelProviders) =>
    own === provider
      ? {
          ...(config.llm.apiKey === undefined ? {} : { apiKey: config.llm.apiKey }),
          ...(config.llm.baseURL === undefined ? {} : { baseURL: config.llm.baseURL }),
        }
      : {};
  const openaiOptions = { ...openai, ...overlay('openai'), ...(own === 'openai' && config.llm.api !== undefined ? { api: config.llm.api } : {}) };
  const compatibleOptions = { ...compatible, ...overlay('compatible') };
  const googleOptions = { ...google, ...overlay('google') };
  // A provider without its key (or, for `compatible`, its base URL) is left out: a model needing it fails by name.
  return {
    ...(openaiOptions.apiKey === undefined ? {} : { openai: { ...openaiOptions, apiKey: openaiOptions.apiKey } }),
    ...(googleOptions.apiKey === undefined ? {} : { google: { ...googleOptions, apiKey: googleOptions.apiKey } }),
    ...(compatibleOptions.baseURL === undefined ? {} : { compatible: { ...compatibleOptions, baseURL: compatibleOptions.baseURL } }),
  };
}

/** Every secret the configuration holds (provider keys, tokens, secret headers and env values, upstreams' OAuth secrets and keys), to scrub from output. */
export function configSecrets(config: KlymConfig): string[] {
  const secrets = [...secretsOf([config.llm.apiKey, ...Object.values(config.server.tokens), config.metrics.token], modelProviders(config))];
  for (const [upstreamName, upstream] of Object.entries(config.upstreams)) {
    // A key file that cannot be read holds no secret to scrub; the pool's own options say why it fails.
    const auth = upstream.disabled === true ? undefined : tryOrUndefined(() => upstreamAuth(upstreamName, upstream));
    // A disabled upstream's headers and env are still scrubbed: the file holds them all the same.
    secrets.push(...upstreamSecrets({ headers: upstream.headers, env: upstream.env, auth }));
  }
  for (const webhook of Object.values(config.webhooks)) secrets.push(webhook.secret, webhook.secret.slice('whsec_'.length));
  const pushSecret = config.a2a?.pushDelivery?.secret;
  if (pushSecret !== undefined) secrets.push(pushSecret, pushSecret.slice('whsec_'.length));
  // A Redis store's URL may carry a password.
  if (/^rediss?:\/\//.test(config.tasks.store) && URL.canParse(config.tasks.store)) secrets.push(decodeURIComponent(new URL(config.tasks.store).password));
  return [...new Set(secrets.filter((secret): secret is string => secret !== undefined && secret.length >= 4))];
}

function tryOrUndefined<T>(read: () => T): T | undefined {
  try {
    return read();
  } catch {
    return undefined;
  }
}

const budget = (value: KlymConfig['budget']['default']): AgentBudget => ({ ...value });

/** The settings of core's `RUN_SETTINGS` that the server builds from several keys (those without a schema). */
type BuiltRunSetting = {
  [Key in keyof typeof RUN_SETTINGS]: (typeof RUN_SETTINGS)[Key] extends { readonly schema: unknown } ? never : Key;
}[keyof typeof RUN_SETTINGS];

/** The run settings every task gets as they are, by the service's option names. */
type ConfigRunSettings = Pick<TaskServiceOptions, keyof typeof RUN_SETTINGS>;

/** How the server builds each run setting that no one config key holds as it is: a row without a schema needs one here. */
const BUILT_RUN_SETTINGS = {
  providers: modelProviders,
  upstreamTools: upstreamToolRules,
} satisfies { readonly [Key in BuiltRunSetting]: (config: KlymConfig) => ConfigRunSettings[Key] };

/**
 * What every run of this configuration is set to, as `runAgent` and the task service both take it: each of
 * core's `RUN_SETTINGS` (providers and prices, windows, retries, the map's model, concurrency and call size,
 * the artifact threshold, temperature, the tool rules and policies) from its config key, and the tools and the
 * system prompt. A setting the config leaves unset is left out. `klym serve` and `klym run` share it.
 */
export function runSettings(config: KlymConfig): ConfigRunSettings & Pick<RunSettings, 'tools' | 'systemPrompt'> {
  const settings: Record<string, unknown> = {};
  for (const [key, row] of Object.entries(RUN_SETTINGS) as [keyof typeof RUN_SETTINGS, { readonly config: string; readonly schema?: unknown }][]) {
    const value =
      row.schema === undefined
        ? BUILT_RUN_SETTINGS[key as BuiltRunSetting](config)
        : row.config.split('.').reduce<unknown>((section, name) => (section as Record<string, unknown>)[name], config);
    if (value !== undefined) settings[key] = value;
  }
  return {
    ...(settings as ConfigRunSettings),
    tools: config.tools,
    ...(config.systemPrompt === undefined ? {} : { systemPrompt: config.systemPrompt }),
  };
}

/** A `tasks.store` value with a SQLite file's path made absolute against `cwd` (the process's working directory). */
export function taskStoreIn(store: string, cwd: string): string {
  return store.startsWith('sqlite:') ? `sqlite:${path.resolve(cwd, store.slice('sqlite:'.length))}` : store;
}

/**
 * Who may call the server: `server.tokens`, `server.admins` and `server.oauth` as the server's `auth`. The
 * OAuth resource defaults here, from `server.host` and `server.port`, so that `klym worker` (which listens
 * elsewhere) takes the same tokens on its /metrics as the server does.
 */
function serverAuth(server: KlymConfig['server']): NonNullable<KlymServerOptions['auth']> {
  const { oauth } = server;
  return {
    tokens: { ...server.tokens },
    admins: [...server.admins],
    ...(oauth === undefined ? {} : { oauth: { ...oauth, resource: oauth.resource ?? defaultResource(server.host, server.port) } }),
  };
}

/** The options of Klym's server (`klym serve`), from the configuration; a relative store path is taken against `cwd`. */
export function serverOptions(config: KlymConfig, cwd: string): KlymServerOptions {
  return {
    upstreams: poolUpstreams(config),
    host: config.server.host,
    port: config.server.port,
    ...(Object.keys(config.server.tokens).length > 0 || config.server.oauth !== undefined ? { auth: serverAuth(config.server) } : {}),
    ...(config.metrics.token === undefined ? {} : { metrics: { token: config.metrics.token } }),
    allowedHosts: config.server.allowedHosts,
    allowedOrigins: config.server.allowedOrigins,
    maxBodyBytes: config.server.bodyLimitBytes,
    sessionIdleMs: config.server.sessionIdleMs,
    ...(config.a2a === undefined ? {} : { a2a: config.a2a }),
    tasks: {
      models: [...new Set([config.llm.model, ...config.llm.models])],
      ...runSettings(config),
      secrets: configSecrets(config),
      defaultBudget: budget(config.budget.default),
      maxBudget: budget(config.budget.max),
      maxConcurrent: config.tasks.concurrency,
      maxQueued: config.tasks.maxQueued,
      ...(config.tasks.perPrincipal === undefined ? {} : { perPrincipal: config.tasks.perPrincipal }),
      taskTimeoutMs: config.tasks.timeoutMs,
      ttlMs: config.tasks.ttlMs,
      log: { maxBytes: config.tasks.logMaxBytes },
      store: taskStoreIn(config.tasks.store, cwd),
      artifactQuery: config.artifacts.query,
      artifactLimits: {
        maxBytesPerTask: config.artifacts.maxBytesPerTask,
        ...(config.artifacts.maxBytes === undefined ? {} : { maxBytes: config.artifacts.maxBytes }),
      },
      runner: config.tasks.runner,
      ...(config.tasks.runnerThreads === undefined ? {} : { runnerThreads: config.tasks.runnerThreads }),
      ...(config.tasks.runnerNiceness === undefined ? {} : { runnerNiceness: config.tasks.runnerNiceness }),
      sharedQueue: { lockDurationMs: config.tasks.lockDurationMs, stalledIntervalMs: config.tasks.stalledIntervalMs },
      resumeOnRestart: config.tasks.resumeOnRestart,
      askCaller: config.tasks.askCaller,
      inputTimeoutMs: config.tasks.inputTimeoutMs,
      writeBack: { upstream: config.writeBack.upstream, byDefault: config.writeBack.enabled, timeZone: config.writeBack.timeZone },
      webhooks: config.webhooks,
      ...(config.a2a?.pushAllow === undefined || config.a2a.pushAllow.length === 0
        ? {}
        : { push: a2aPush({ allow: config.a2a.pushAllow, ...config.a2a.pushDelivery }) }),
      shutdownGraceMs: config.tasks.shutdownGraceMs,
    },
  };
}
