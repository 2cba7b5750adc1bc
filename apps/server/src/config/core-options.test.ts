import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { RUN_SETTINGS } from '@klym/core/server';
import { configSecrets, modelProviders, poolUpstreams, runSettings, serverOptions, upstreamToolRules } from './core-options.ts';
import { formatConfigYaml } from './format-config.ts';
import { resolveConfig } from './resolve-config.ts';
import { schemaAt, settablePaths } from './schema-paths.ts';

const cwd = mkdtempSync(path.join(tmpdir(), 'klym-core-options-'));
afterAll(() => rmSync(cwd, { recursive: true, force: true }));

const configWith = (env: Record<string, string>) => resolveConfig({ cwd, env }).config;

describe('mapping the configuration onto core and the server', () => {
  it('opens only enabled upstreams, and hands each one’s tool rules to the agent', () => {
    const config = configWith({
      KLYM_UPSTREAMS: JSON.stringify({
        grynya: { url: 'http://127.0.0.1:8000/sse', transport: 'sse', tools: { deny: ['add_*'], probe: { tool: 'query_graph', args: { query: 'RETURN 1' } } } },
        off: { command: 'node', disabled: true, tools: { allow: ['x'] } },
      }),
    });
    expect(poolUpstreams(config)).toEqual({ grynya: { url: 'http://127.0.0.1:8000/sse', transport: 'sse' } });
    expect(upstreamToolRules(config)).toEqual({ grynya: { deny: ['add_*'], probe: { tool: 'query_graph', args: { query: 'RETURN 1' } } } });
  });

  it('gives the server the run settings and every credential to redact', () => {
    const options = serverOptions(
      configWith({
        KLYM_LLM_TEMPERATURE: '0.2',
        KLYM_LLM_MAX_RETRIES: '5',
        KLYM_LLM_CONTEXT_WINDOWS: JSON.stringify({ 'compatible:llama3': 8_192 }),
        KLYM_UPSTREAMS: JSON.stringify({
          kb: { url: 'http://127.0.0.1:9/mcp', headers: { Authorization: 'Bearer upstream-secret-123' }, tools: { readOnlyTools: ['search'] } },
        }),
      }),
      cwd,
    );
    expect(options.tasks).toMatchObject({
      temperature: 0.2,
      maxRetries: 5,
      contextWindows: { 'compatible:llama3': 8_192 },
      upstreamTools: { kb: { readOnlyTools: ['search'] } },
      mapConcurrency: 4,
    });
    expect(
      serverOptions(configWith({ KLYM_LLM_MAP_MODEL: 'scripted', KLYM_LLM_MAP_CONCURRENCY: '8', KLYM_LLM_ARTIFACT_THRESHOLD_TOKENS: '5000' }), cwd).tasks,
    ).toMatchObject({
      mapModel: 'scripted',
      mapConcurrency: 8,
      artifactThresholdTokens: 5_000,
    });
    expect(() => configWith({ KLYM_LLM_MAP_MODEL: 'gemini-2.5-flash' })).toThrow(
      /llm\.mapModel = "gemini-2\.5-flash": needs an API key for the google provider/,
    );
    expect(options.tasks?.secrets).toContain('upstream-secret-123');
  });

  it('takes each of core’s RUN_SETTINGS from its config key, by the env variable and with the default it always had', () => {
    const envNames = new Map(settablePaths().map(({ path: keyPath, envName }) => [keyPath.join('.'), envName]));
    expect(Object.values(RUN_SETTINGS).map((row) => envNames.get(row.config) ?? row.config)).toEqual([
      'llm.providers',
      'KLYM_LLM_TEMPERATURE',
      'KLYM_LLM_PRICES',
      'KLYM_LLM_CONTEXT_WINDOWS',
      'KLYM_LLM_MAP_MODEL',
      'KLYM_LLM_MAP_CONCURRENCY',
      'KLYM_LLM_MAP_CHUNK_TOKENS',
      'KLYM_LLM_ARTIFACT_THRESHOLD_TOKENS',
      'KLYM_LLM_MAX_RETRIES',
      'upstreams.<name>.tools',
      'KLYM_POLICIES',
      'KLYM_READ_ONLY_TOOLS',
      'code',
    ]);
    expect(Object.values(RUN_SETTINGS).filter((row) => schemaAt(row.config.split('.')) === undefined)).toEqual([]);
    expect(runSettings(configWith({}))).toEqual({
      providers: {},
      prices: {},
      contextWindows: {},
      mapConcurrency: 4,
      mapChunkTokens: 32_000,
      maxRetries: 2,
      upstreamTools: {},
      policies: {},
      readOnlyTools: [],
      code: { memoryMiB: 64, timeoutMs: 60_000, maxRows: 10_000 },
      tools: {},
    });
    const config = configWith({
      KLYM_LLM_MODEL: 'compatible:llama3',
      KLYM_LLM_BASE_URL: 'http://127.0.0.1:11434/v1',
      KLYM_LLM_TEMPERATURE: '0.5',
      KLYM_LLM_PRICES: '{"compatible:llama3":{"inputPerMillion":1,"outputPerMillion":2}}',
      KLYM_LLM_CONTEXT_WINDOWS: '{"compatible:llama3":8192}',
      KLYM_LLM_MAP_MODEL: 'scripted',
      KLYM_LLM_MAP_CONCURRENCY: '3',
      KLYM_LLM_MAP_CHUNK_TOKENS: '2000',
      KLYM_LLM_ARTIFACT_THRESHOLD_TOKENS: '700',
      KLYM_LLM_MAX_RETRIES: '0',
      KLYM_UPSTREAMS: JSON.stringify({ kb: { url: 'http://127.0.0.1:9/mcp', tools: { deny: ['drop_*'] } } }),
      KLYM_POLICIES: '{"reader":{"readOnly":true}}',
      KLYM_READ_ONLY_TOOLS: 'kb__search,kb__list',
      KLYM_TOOLS_POLICY: 'reader',
      KLYM_SYSTEM_PROMPT: 'Be brief. {{tools}}',
      KLYM_CODE_TIMEOUT_MS: '5000',
    });
    expect(runSettings(config)).toEqual({
      temperature: 0.5,
      providers: { compatible: { baseURL: 'http://127.0.0.1:11434/v1' } },
      prices: { 'compatible:llama3': { inputPerMillion: 1, outputPerMillion: 2 } },
      contextWindows: { 'compatible:llama3': 8_192 },
      mapModel: 'scripted',
      mapConcurrency: 3,
      mapChunkTokens: 2_000,
      artifactThresholdTokens: 700,
      maxRetries: 0,
      upstreamTools: { kb: { deny: ['drop_*'] } },
      policies: { reader: { readOnly: true } },
      readOnlyTools: ['kb__search', 'kb__list'],
      tools: { policy: 'reader' },
      systemPrompt: 'Be brief. {{tools}}',
      code: { memoryMiB: 64, timeoutMs: 5_000, maxRows: 10_000 },
    });
    expect(() => configWith({ KLYM_LLM_TEMPERATURE: '3' })).toThrow(/llm\.temperature.*KLYM_LLM_TEMPERATURE/);
  });

  it('hands writeBack.timeZone to the task service, and refuses a time zone Intl does not know', () => {
    expect(serverOptions(configWith({ KLYM_WRITE_BACK_TIME_ZONE: 'Europe/Kyiv' }), cwd).tasks?.writeBack).toEqual({
      upstream: 'grynya',
      byDefault: false,
      timeZone: 'Europe/Kyiv',
    });
    expect(serverOptions(configWith({}), cwd).tasks?.writeBack).toMatchObject({ timeZone: 'UTC' });
    expect(() => configWith({ KLYM_WRITE_BACK_TIME_ZONE: 'Mars/Olympus' })).toThrow(
      /writeBack\.timeZone.*Mars\/Olympus.*IANA time zone.*KLYM_WRITE_BACK_TIME_ZONE/,
    );
  });

  it('hands tasks.perPrincipal to the task service, and refuses a limit that is not a positive integer, naming its key', () => {
    expect(serverOptions(configWith({}), cwd).tasks).not.toHaveProperty('perPrincipal');
    const env = {
      KLYM_TASKS_PER_PRINCIPAL_MAX_RUNNING: '2',
      KLYM_TASKS_PER_PRINCIPAL_MAX_QUEUED: '5',
      KLYM_TASKS_PER_PRINCIPAL_OVERRIDES: JSON.stringify({ 'batch@example.com': { maxQueued: 500 } }),
    };
    expect(serverOptions(configWith(env), cwd).tasks?.perPrincipal).toEqual({
      maxRunning: 2,
      maxQueued: 5,
      overrides: { 'batch@example.com': { maxQueued: 500 } },
    });
    expect(serverOptions(configWith({ KLYM_TASKS_PER_PRINCIPAL_MAX_QUEUED: '7' }), cwd).tasks?.perPrincipal).toEqual({ maxQueued: 7 });
    expect(() => configWith({ KLYM_TASKS_PER_PRINCIPAL_OVERRIDES: JSON.stringify({ batch: { maxRunning: 0 } }) })).toThrow(
      /tasks\.perPrincipal\.overrides\.batch\.maxRunning/,
    );
    expect(() => configWith({ KLYM_TASKS_PER_PRINCIPAL_OVERRIDES: JSON.stringify({ batch: { maxWaiting: 5 } }) })).toThrow(/maxWaiting/);
    // Spend per day: tokens a whole number, USD any positive amount.
    const daily = {
      KLYM_TASKS_PER_PRINCIPAL_MAX_TOKENS_PER_DAY: '2000000',
      KLYM_TASKS_PER_PRINCIPAL_MAX_USD_PER_DAY: '2.5',
      KLYM_TASKS_PER_PRINCIPAL_OVERRIDES: JSON.stringify({ batch: { maxUsdPerDay: 40 } }),
    };
    expect(serverOptions(configWith(daily), cwd).tasks?.perPrincipal).toEqual({
      maxTokensPerDay: 2_000_000,
      maxUsdPerDay: 2.5,
      overrides: { batch: { maxUsdPerDay: 40 } },
    });
    expect(() => configWith({ KLYM_TASKS_PER_PRINCIPAL_MAX_TOKENS_PER_DAY: '1.5' })).toThrow(/tasks\.perPrincipal\.maxTokensPerDay/);
    expect(() => configWith({ KLYM_TASKS_PER_PRINCIPAL_MAX_USD_PER_DAY: '0' })).toThrow(/tasks\.perPrincipal\.maxUsdPerDay/);
  });

  it('gives llm.apiKey and llm.baseURL to the default model’s provider, and leaves a provider without its key out', () => {
    expect(modelProviders(configWith({ KLYM_LLM_MODEL: 'compatible:llama3', KLYM_LLM_BASE_URL: 'http://127.0.0.1:11434/v1' }))).toEqual({
      compatible: { baseURL: 'http://127.0.0.1:11434/v1' },
    });
    expect(
      modelProviders(configWith({ KLYM_LLM_MODEL: 'gpt-4.1-mini', KLYM_LLM_API_KEY: 'sk-a', KLYM_LLM_API: 'chat', GOOGLE_GENERATIVE_AI_API_KEY: 'g-b' })),
    ).toEqual({
      openai: { apiKey: 'sk-a', api: 'chat' },
      google: { apiKey: 'g-b' },
    });
    expect(modelProviders(configWith({ OPENAI_BASE_URL: 'http://127.0.0.1:1/v1' }))).toEqual({});
  });

  it('refuses a model whose provider has no key or base URL, naming where to set it', () => {
    expect(() => configWith({ KLYM_LLM_MODELS: 'gemini-2.5-flash' })).toThrow(
      'llm.models[0] = "gemini-2.5-flash": needs an API key for the google provider: set GOOGLE_GENERATIVE_AI_API_KEY, `llm.apiKey` or `llm.providers.google.apiKey` (env KLYM_LLM_MODELS)',
    );
    expect(() => configWith({ KLYM_LLM_MODEL: 'compatible:llama3' })).toThrow('a `compatible:` model needs a base URL');
  });

  it('builds the server’s options: loopback always allowed, models with the default first, tokens as auth, task limits', () => {
    const config = configWith({
      KLYM_SERVER_ALLOWED_HOSTS: 'grynya-mcp-server',
      KLYM_SERVER_TOKENS: '{"grynya":"0123456789abcdef"}',
      KLYM_LLM_MODELS: 'scripted,compatible:llama3',
      KLYM_LLM_PROVIDERS_COMPATIBLE_BASE_URL: 'http://127.0.0.1:11434/v1',
      KLYM_TASKS_CONCURRENCY: '2',
      KLYM_WRITE_BACK_ENABLED: 'true',
    });
    expect(serverOptions(config, cwd)).toMatchObject({
      host: '127.0.0.1',
      port: 8765,
      auth: { tokens: { grynya: '0123456789abcdef' } },
      allowedHosts: ['grynya-mcp-server'],
      allowedOrigins: [],
      tasks: {
        models: ['scripted', 'compatible:llama3'],
        defaultBudget: { maxSteps: 25 },
        maxBudget: { maxSteps: 100, timeoutMs: 1_800_000 },
        maxConcurrent: 2,
        log: { maxBytes: 262_144 },
        taskTimeoutMs: 1_800_000,
        writeBack: { upstream: 'grynya', byDefault: true },
        resumeOnRestart: true,
      },
    });
    expect(serverOptions(configWith({}), cwd)).not.toHaveProperty('auth');
  });

  it('keeps tasks in .klym/tasks.db under the working directory by default; a relative store path is taken against it', () => {
    expect(serverOptions(configWith({}), cwd).tasks?.store).toBe(`sqlite:${path.join(cwd, '.klym', 'tasks.db')}`);
    expect(serverOptions(configWith({ KLYM_TASKS_STORE: 'sqlite:data/klym.db' }), '/srv/klym').tasks?.store).toBe('sqlite:/srv/klym/data/klym.db');
    expect(serverOptions(configWith({ KLYM_TASKS_STORE: 'sqlite:/var/lib/klym/tasks.db' }), cwd).tasks?.store).toBe('sqlite:/var/lib/klym/tasks.db');
    expect(serverOptions(configWith({ KLYM_TASKS_STORE: 'memory', KLYM_TASKS_RESUME_ON_RESTART: 'false' }), cwd).tasks).toMatchObject({
      store: 'memory',
      resumeOnRestart: false,
    });
    expect(() => configWith({ KLYM_TASKS_STORE: 'postgres://db/klym' })).toThrow(
      'tasks.store = "postgres://db/klym": expected "memory", "sqlite:<path>" (e.g. sqlite:.klym/tasks.db) or "redis://host:port/db" (rediss:// for TLS) (env KLYM_TASKS_STORE)',
    );
  });

  it("takes a Redis store and its queue settings; tasks.concurrency 0 only with one; the URL's password is a secret", () => {
    const config = configWith({ KLYM_TASKS_STORE: 'redis://:hunter2-secret@redis:6379/2', KLYM_TASKS_CONCURRENCY: '0', KLYM_TASKS_LOCK_DURATION_MS: '5000' });
    const options = serverOptions(config, '/srv/klym');
    expect(options.tasks).toMatchObject({
      store: 'redis://:hunter2-secret@redis:6379/2',
      maxConcurrent: 0,
      sharedQueue: { lockDurationMs: 5_000, stalledIntervalMs: 10_000 },
    });
    expect(configSecrets(config)).toContain('hunter2-secret');
    expect(() => configWith({ KLYM_TASKS_CONCURRENCY: '0' })).toThrow(
      'tasks.concurrency = 0: expected at least 1: only with a Redis `tasks.store` can a process run no tasks',
    );
  });

  it('runs tasks on the runner thread by default; `inline` on the thread that serves requests', () => {
    expect(serverOptions(configWith({}), cwd).tasks?.runner).toBe('thread');
    expect(serverOptions(configWith({ KLYM_TASKS_RUNNER: 'inline' }), cwd).tasks?.runner).toBe('inline');
    expect(() => configWith({ KLYM_TASKS_RUNNER: 'process' })).toThrow(
      'tasks.runner = "process": Invalid option: expected one of "thread"|"inline" (env KLYM_TASKS_RUNNER)',
    );
  });

  it('spreads runs over `tasks.runnerThreads` threads when set (else the runner picks the cores less one); 0 is refused, naming the key', () => {
    expect(serverOptions(configWith({}), cwd).tasks?.runnerThreads).toBeUndefined();
    expect(serverOptions(configWith({ KLYM_TASKS_RUNNER_THREADS: '3' }), cwd).tasks?.runnerThreads).toBe(3);
    expect(() => configWith({ KLYM_TASKS_RUNNER_THREADS: '0' })).toThrow(
      'tasks.runnerThreads = 0: Too small: expected number to be >0 (env KLYM_TASKS_RUNNER_THREADS)',
    );
  });

  it("sets the runner threads' nice value from `tasks.runnerNiceness` (0-19), naming the key when out of range", () => {
    expect(serverOptions(configWith({}), cwd).tasks?.runnerNiceness).toBeUndefined();
    expect(serverOptions(configWith({ KLYM_TASKS_RUNNER_NICENESS: '0' }), cwd).tasks?.runnerNiceness).toBe(0);
    expect(() => configWith({ KLYM_TASKS_RUNNER_NICENESS: '20' })).toThrow(
      /tasks\.runnerNiceness = 20: Too big: expected number to be <=19 \(env KLYM_TASKS_RUNNER_NICENESS\)/,
    );
  });

  it('hands the webhook endpoints to the task service with their defaults; `klym config` redacts each secret, and an error never shows one', () => {
    const secret = `whsec_${Buffer.alloc(32, 7).toString('base64')}`;
    const env = {
      KLYM_WEBHOOKS: JSON.stringify({
        ops: { url: 'https://hooks.example.com/klym', secret, events: ['task.started', 'task.failed'] },
        audit: { url: 'http://127.0.0.1:9/h', secret, all: true, retryForMs: 60_000 },
      }),
    };
    const resolved = resolveConfig({ cwd, env });
    expect(serverOptions(resolved.config, cwd).tasks?.webhooks).toEqual({
      ops: {
        url: 'https://hooks.example.com/klym',
        secret,
        events: ['task.started', 'task.failed'],
        all: false,
        retryForMs: 86_400_000,
        retryDelayMs: 5_000,
        maxRetryDelayMs: 3_600_000,
        timeoutMs: 10_000,
      },
      audit: {
        url: 'http://127.0.0.1:9/h',
        secret,
        events: ['task.input_required', 'task.completed', 'task.failed', 'task.cancelled'],
        all: true,
        retryForMs: 60_000,
        retryDelayMs: 5_000,
        maxRetryDelayMs: 3_600_000,
        timeoutMs: 10_000,
      },
    });
    expect(configSecrets(resolved.config)).toEqual(expect.arrayContaining([secret, secret.slice('whsec_'.length)]));
    const printed = formatConfigYaml(resolved);
    expect(printed).toContain('secret: <redacted> # env KLYM_WEBHOOKS');
    expect(printed).not.toContain(secret.slice('whsec_'.length));

    const badSecret = 'my-plain-password-123';
    expect(() => configWith({ KLYM_WEBHOOKS: JSON.stringify({ ops: { url: 'https://hooks.example.com/', secret: badSecret } }) })).toThrow(
      /webhooks\.ops\.secret = <redacted>: expected `whsec_`/,
    );
    expect(() => configWith({ KLYM_WEBHOOKS: JSON.stringify({ ops: { url: 'https://hooks.example.com/', secret: badSecret } }) })).not.toThrow(badSecret);
    expect(() => configWith({ KLYM_WEBHOOKS: JSON.stringify({ ops: { url: 'https://hooks.example.com/', secret, events: ['task.done'] } }) })).toThrow(
      /webhooks\.ops\.events\[0\] = "task.done": Invalid option/,
    );
    expect(() => configWith({ KLYM_WEBHOOKS: JSON.stringify({ ops: { url: 'https://hooks.example.com/', secret, headers: {} } }) })).toThrow(/headers/);
  });

  it('collects every secret the configuration holds, to scrub from output', () => {
    const config = configWith({
      OPENAI_API_KEY: 'sk-openai-1',
      KLYM_SERVER_TOKENS: '{"grynya":"0123456789abcdef"}',
      KLYM_UPSTREAMS: JSON.stringify({
        a: { url: 'http://127.0.0.1:1/mcp', headers: { Authorization: 'Bearer upstream-token', Host: 'localhost' } },
        b: { command: 'node', env: { GITHUB_TOKEN: 'gh-token', HOME: '/home/x' } },
      }),
    });
    expect(configSecrets(config).toSorted()).toEqual(['0123456789abcdef', 'gh-token', 'sk-openai-1', 'upstream-token']);
  });

  it('reads an upstream’s OAuth key file for the pool, and counts its secret and key among the secrets, hidden by `klym config`', () => {
    const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const pem = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
    const keyFile = path.join(cwd, 'upstream-key.pem');
    writeFileSync(keyFile, pem);
    const upstreams = {
      secret: {
        url: 'http://127.0.0.1:1/mcp',
        auth: { type: 'client_credentials', clientId: 'klym', clientSecret: 'cs-0123456789', scope: 'mcp:tools', issuer: 'https://auth.example' },
      },
      signed: { url: 'http://127.0.0.1:2/mcp', auth: { type: 'private_key_jwt', clientId: 'klym', privateKeyFile: keyFile, issuer: 'https://auth.example' } },
    };
    const config = configWith({ KLYM_UPSTREAMS: JSON.stringify(upstreams) });

    expect(poolUpstreams(config)).toEqual({
      secret: { url: 'http://127.0.0.1:1/mcp', auth: upstreams.secret.auth },
      signed: { url: 'http://127.0.0.1:2/mcp', auth: { type: 'private_key_jwt', clientId: 'klym', privateKey: pem, issuer: 'https://auth.example' } },
    });
    const secrets = configSecrets(config);
    expect(secrets).toEqual(expect.arrayContaining(['cs-0123456789', pem.trim(), ...pem.trim().split('\n').slice(1, -1)]));
    const inline = { url: 'http://127.0.0.1:3/mcp', auth: { type: 'private_key_jwt', clientId: 'klym', privateKey: pem, issuer: 'https://auth.example' } };
    const shown = formatConfigYaml(resolveConfig({ cwd, env: { KLYM_UPSTREAMS: JSON.stringify({ ...upstreams, inline }) } }));
    expect(shown).not.toContain('cs-0123456789');
    expect(shown).not.toContain(pem.split('\n')[1] as string);
  });

  it('refuses `auth` on a stdio upstream, and a key given both inline and as a file, naming the key', () => {
    const auth = { type: 'private_key_jwt', clientId: 'klym', privateKey: 'x', privateKeyFile: '/k.pem', issuer: 'https://auth.example' };
    expect(() => configWith({ KLYM_UPSTREAMS: JSON.stringify({ a: { url: 'http://127.0.0.1:1/mcp', auth } }) })).toThrow(
      /upstreams\.a\.auth.*exactly one of `privateKey` or `privateKeyFile`/,
    );
    const secretAuth = { type: 'client_credentials', clientId: 'klym', clientSecret: 'cs-0123456789', issuer: 'https://auth.example' };
    expect(() => configWith({ KLYM_UPSTREAMS: JSON.stringify({ b: { command: 'node', auth: secretAuth } }) })).toThrow(
      /upstreams\.b\.auth: `auth` needs a `url`/,
    );
    // Without an issuer the upstream would choose who receives the credentials.
    const { issuer: _issuer, ...unpinned } = secretAuth;
    expect(() => configWith({ KLYM_UPSTREAMS: JSON.stringify({ c: { url: 'http://127.0.0.1:1/mcp', auth: unpinned } }) })).toThrow(
      /upstreams\.c\.auth\.issuer.*authorization server/,
    );
    // Plain http only on loopback: elsewhere the secret would cross the network in the clear.
    const plain = { ...secretAuth, issuer: 'http://auth.example' };
    expect(() => configWith({ KLYM_UPSTREAMS: JSON.stringify({ d: { url: 'http://127.0.0.1:1/mcp', auth: plain } }) })).toThrow(
      /upstreams\.d\.auth\.issuer.*plain http only on loopback/,
    );
    const local = { ...secretAuth, issuer: 'http://127.0.0.1:9000' };
    expect(
      serverOptions(configWith({ KLYM_UPSTREAMS: JSON.stringify({ e: { url: 'http://127.0.0.1:1/mcp', auth: local } }) }), cwd).upstreams?.e,
    ).toMatchObject({ auth: { issuer: 'http://127.0.0.1:9000' } });
  });
});
