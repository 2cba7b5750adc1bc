import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { isKlymError } from '@klym/core';
import { afterAll, describe, expect, it } from 'vitest';
import { resolveServerOptions } from '../server/server-options.ts';
import { poolUpstreams, serverOptions } from './core-options.ts';
import { resolveConfig, type ResolveConfigOptions } from './resolve-config.ts';

const root = mkdtempSync(path.join(tmpdir(), 'klym-config-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
let count = 0;

/** A fresh working directory holding the given files. */
function workspace(files: Record<string, string> = {}): string {
  count += 1;
  const directory = path.join(root, `case-${count}`);
  mkdirSync(directory);
  for (const [name, text] of Object.entries(files)) writeFileSync(path.join(directory, name), text);
  return directory;
}

/** The message of the CONFIG_INVALID error that resolving throws. */
function failure(options: ResolveConfigOptions): string {
  try {
    resolveConfig(options);
  } catch (error) {
    if (isKlymError(error, 'CONFIG_INVALID')) return error.message;
    throw error;
  }
  throw new Error('expected resolveConfig to throw CONFIG_INVALID');
}

describe('config file', () => {
  it.each(['klym.config.yaml', 'klym.config.yml', 'klym.config.json'])('is found as %s in the working directory', (name) => {
    const text = name.endsWith('.json') ? '{"server":{"port":9001}}' : 'server:\n  port: 9001 # a comment\n';
    const { config, sourceOf, file } = resolveConfig({ cwd: workspace({ [name]: text }) });
    expect(config.server.port).toBe(9001);
    expect(sourceOf(['server', 'port'])).toBe(`file ${name}`);
    expect(file).toMatch(new RegExp(`${name.replaceAll('.', '\\.')}$`));
  });

  it('prefers klym.config.yaml over .yml and .json, and --config over all of them and KLYM_CONFIG', () => {
    const cwd = workspace({
      'klym.config.yaml': 'server: { port: 1 }',
      'klym.config.yml': 'server: { port: 2 }',
      'klym.config.json': '{"server":{"port":3}}',
      'other.yaml': 'server: { port: 4 }',
      'env.json': '{"server":{"port":5}}',
    });
    expect(resolveConfig({ cwd }).config.server.port).toBe(1);
    expect(resolveConfig({ cwd, env: { KLYM_CONFIG: 'env.json' } }).config.server.port).toBe(5);
    expect(resolveConfig({ cwd, configFile: 'other.yaml', env: { KLYM_CONFIG: 'env.json' } }).config.server.port).toBe(4);
  });

  it('without any file, every value is the default', () => {
    const { config, sourceOf, file } = resolveConfig({ cwd: workspace() });
    expect(file).toBeUndefined();
    expect(config.llm.model).toBe('scripted');
    expect(sourceOf(['llm', 'model'])).toBe('default');
  });

  it('a missing --config file, invalid YAML or JSON, and a file that is not a map are refused, naming the file', () => {
    const cwd = workspace({ 'bad.yaml': 'server:\n  port: [1,\n', 'bad.json': '{"server":', 'list.yaml': '- 1\n- 2\n' });
    expect(failure({ cwd, configFile: 'missing.yaml' })).toMatch(/Cannot read config file .*missing\.yaml/);
    expect(failure({ cwd, configFile: 'bad.yaml' })).toMatch(/Config file .*bad\.yaml is not valid YAML/);
    expect(failure({ cwd, configFile: 'bad.json' })).toMatch(/Config file .*bad\.json is not valid JSON/);
    expect(failure({ cwd, configFile: 'list.yaml' })).toMatch(/list\.yaml must hold a map of settings, got a list/);
  });

  it('an unknown key, a wrong value and a cross-key problem name the key, the fault and the file', () => {
    const cwd = workspace({ 'klym.config.yaml': 'server:\n  prot: 80\ntasks:\n  concurrency: -2\nbudget:\n  default: { maxSteps: 500 }\n' });
    const message = failure({ cwd });
    expect(message).toContain('server.prot: unknown key (did you mean "port"?) (file klym.config.yaml)');
    expect(message).toContain('tasks.concurrency = -2: Too small: expected number to be >=0 (file klym.config.yaml)');
    const crossKey = failure({ cwd: workspace({ 'klym.config.yaml': 'budget:\n  default: { maxSteps: 500 }\n' }) });
    expect(crossKey).toContain('budget.default.maxSteps = 500: expected at most `budget.max.maxSteps` (100) (file klym.config.yaml)');
  });
});

describe('environment', () => {
  it('refuses a time limit past what a Node timer can wait (it would fire at once)', () => {
    expect(failure({ cwd: workspace(), env: { KLYM_TASKS_TIMEOUT_MS: '3000000000' } })).toContain(
      'tasks.timeoutMs = 3000000000: expected at most 2147483647 ms (about 24.8 days; Node timers fire at once past that) (env KLYM_TASKS_TIMEOUT_MS)',
    );
    expect(
      failure({ cwd: workspace({ 'klym.config.yaml': 'upstreams:\n  a:\n    url: http://127.0.0.1:1/mcp\n    timeouts: { requestMs: 2147483648 }\n' }) }),
    ).toContain('upstreams.a.timeouts.requestMs');
  });

  it('sets any key by KLYM_<PATH>: numbers, booleans, comma or JSON lists, JSON maps', () => {
    const { config, sourceOf } = resolveConfig({
      cwd: workspace({ 'klym.config.yaml': 'server: { port: 1, host: 127.0.0.2 }' }),
      env: {
        KLYM_SERVER_PORT: '9002',
        KLYM_WRITE_BACK_ENABLED: 'true',
        KLYM_SERVER_ALLOWED_HOSTS: 'klym, grynya',
        KLYM_READ_ONLY_TOOLS: '["grynya__query_graph"]',
        KLYM_LLM_PRICES: '{"openai:gpt-4.1-mini":{"inputPerMillion":0.4,"outputPerMillion":1.6}}',
      },
    });
    expect(config.server).toMatchObject({ port: 9002, host: '127.0.0.2', allowedHosts: ['klym', 'grynya'] });
    expect(config.writeBack.enabled).toBe(true);
    expect(config.readOnlyTools).toEqual(['grynya__query_graph']);
    expect(config.llm.prices['openai:gpt-4.1-mini']).toEqual({ inputPerMillion: 0.4, outputPerMillion: 1.6 });
    expect(sourceOf(['server', 'port'])).toBe('env KLYM_SERVER_PORT');
    expect(sourceOf(['server', 'host'])).toBe('file klym.config.yaml');
    expect(sourceOf(['llm', 'prices', 'openai:gpt-4.1-mini', 'inputPerMillion'])).toBe('env KLYM_LLM_PRICES');
  });

  it('reads the providers’ usual variables, and a KLYM_ variable of the same key wins', () => {
    const env = { OPENAI_API_KEY: 'sk-from-openai-var', OPENAI_BASE_URL: 'http://127.0.0.1:11434/v1', GOOGLE_GENERATIVE_AI_API_KEY: 'g-key' };
    const { config, sourceOf } = resolveConfig({ cwd: workspace(), env });
    expect(config.llm.providers.openai).toEqual({ apiKey: 'sk-from-openai-var', baseURL: 'http://127.0.0.1:11434/v1' });
    expect(config.llm.providers.google.apiKey).toBe('g-key');
    expect(sourceOf(['llm', 'providers', 'openai', 'apiKey'])).toBe('env OPENAI_API_KEY');
    const overridden = resolveConfig({ cwd: workspace(), env: { ...env, KLYM_LLM_PROVIDERS_OPENAI_API_KEY: 'sk-klym' } });
    expect(overridden.config.llm.providers.openai.apiKey).toBe('sk-klym');
    expect(overridden.sourceOf(['llm', 'providers', 'openai', 'apiKey'])).toBe('env KLYM_LLM_PROVIDERS_OPENAI_API_KEY');
  });

  it('an unknown KLYM_ variable is refused with the nearest known one; a wrong value names the variable', () => {
    expect(failure({ cwd: workspace(), env: { KLYM_SERVER_PROT: '80' } })).toBe(
      'Unknown configuration variable KLYM_SERVER_PROT (from env); did you mean KLYM_SERVER_PORT?',
    );
    expect(failure({ cwd: workspace(), env: { KLYM_SERVER_PORT: 'eighty' } })).toBe(
      'Invalid configuration: server.port = "eighty": expected number, received string (env KLYM_SERVER_PORT)',
    );
    expect(failure({ cwd: workspace(), env: { KLYM_UPSTREAMS: '{"grynya":{"url":"ftp://x"}}' } })).toContain(
      'upstreams.grynya.url = "ftp://x": expected an http(s) URL (env KLYM_UPSTREAMS)',
    );
  });

  it('never shows a secret in an error', () => {
    const message = failure({ cwd: workspace(), env: { KLYM_SERVER_TOKENS: '{"grynya":"short-secret"}', OPENAI_API_KEY: 'x'.repeat(3) } });
    expect(message).toContain('server.tokens.grynya = <redacted>: expected a token of at least 16 characters (env KLYM_SERVER_TOKENS)');
    expect(message).not.toContain('short-secret');
  });
});

describe('flags', () => {
  it('win over the environment and the file, and are named as the source', () => {
    const cwd = workspace({ 'klym.config.yaml': 'llm: { model: google:gemini-2.5-flash }' });
    const { config, sourceOf } = resolveConfig({
      cwd,
      env: { KLYM_LLM_MODEL: 'openai:gpt-4.1' },
      flags: [{ path: ['llm', 'model'], value: 'scripted', source: 'flag --model' }],
    });
    expect(config.llm.model).toBe('scripted');
    expect(sourceOf(['llm', 'model'])).toBe('flag --model');
  });

  it('a wrong flag value names the flag', () => {
    expect(failure({ cwd: workspace(), flags: [{ path: ['server', 'port'], value: '70000', source: 'flag --port' }] })).toBe(
      'Invalid configuration: server.port = 70000: Too big: expected number to be <=65535 (flag --port)',
    );
  });
});

describe('upstreams and mcpServers', () => {
  it('accepts a desktop client’s mcpServers list as pasted, and merges it into upstreams', () => {
    const desktop = {
      mcpServers: {
        memory: { command: 'npx', args: ['-y', '@modelcontextprotocol/server-memory'], env: { MEMORY_FILE_PATH: '/tmp/m.json' } },
        grynya: { type: 'sse', url: 'http://grynya-mcp-server:8000/sse', headers: { Host: 'localhost' }, timeout: 30, autoApprove: [], disabled: false },
        remote: { type: 'http', url: 'https://example.com/mcp' },
      },
      upstreams: { everything: { url: 'http://127.0.0.1:3001/mcp', transport: 'streamable-http' } },
    };
    const { config, sourceOf } = resolveConfig({ cwd: workspace({ 'klym.config.json': JSON.stringify(desktop) }) });
    expect(Object.keys(config.upstreams).toSorted()).toEqual(['everything', 'grynya', 'memory', 'remote']);
    expect(config.upstreams.grynya).toEqual({
      url: 'http://grynya-mcp-server:8000/sse',
      transport: 'sse',
      headers: { Host: 'localhost' },
      disabled: false,
      timeouts: { requestMs: 30_000 },
    });
    expect(config.upstreams.memory).toEqual({ command: 'npx', args: ['-y', '@modelcontextprotocol/server-memory'], env: { MEMORY_FILE_PATH: '/tmp/m.json' } });
    expect(config.upstreams.remote?.transport).toBe('streamable-http');
    expect(sourceOf(['upstreams', 'grynya', 'transport'])).toBe('file klym.config.json');
    expect(config).not.toHaveProperty('mcpServers');
  });

  it('refuses an upstream with neither or both of url and command, a bad name, a clash between the two maps, and unknown keys', () => {
    const cwd = workspace({
      'klym.config.yaml': [
        'upstreams:',
        '  none: { headers: { Host: localhost } }',
        '  both: { url: "http://127.0.0.1:1/mcp", command: node }',
        '  "bad name": { url: "http://127.0.0.1:1/mcp" }',
        '  clash: { url: "http://127.0.0.1:1/mcp", retries: 3 }',
        'mcpServers:',
        '  clash: { command: node }',
      ].join('\n'),
    });
    const message = failure({ cwd });
    expect(message).toContain('upstreams.none: expected exactly one of `url` or `command` (file klym.config.yaml)');
    expect(message).toContain('upstreams.both: expected exactly one of `url` or `command`');
    expect(message).toContain('upstreams["bad name"]');
    expect(message).toContain('expected an upstream name of letters and digits');
    expect(message).toContain('upstreams.clash.retries: unknown key');
    const clash = failure({
      cwd: workspace({ 'klym.config.yaml': 'upstreams:\n  clash: { url: "http://127.0.0.1:1/mcp" }\nmcpServers:\n  clash: { command: node }\n' }),
    });
    expect(clash).toContain('mcpServers.clash: an upstream named "clash" is also in `upstreams` (file klym.config.yaml)');
  });

  it('hands an upstream’s sessionScope to the pool, and refuses a value other than shared or task', () => {
    const { config } = resolveConfig({ cwd: workspace({ 'klym.config.yaml': 'upstreams:\n  browser: { command: node, sessionScope: task }\n' }) });
    expect(poolUpstreams(config).browser).toMatchObject({ command: 'node', sessionScope: 'task' });
    const message = failure({ cwd: workspace({ 'klym.config.yaml': 'upstreams:\n  browser: { command: node, sessionScope: session }\n' }) });
    expect(message).toContain('upstreams.browser.sessionScope');
    expect(message).toContain('(file klym.config.yaml)');
  });

  it('hands an upstream’s maxMessageBytes to the pool, and refuses one that is not a positive integer', () => {
    const { config } = resolveConfig({ cwd: workspace({ 'klym.config.yaml': 'upstreams:\n  files: { command: node, maxMessageBytes: 134217728 }\n' }) });
    expect(poolUpstreams(config).files).toMatchObject({ command: 'node', maxMessageBytes: 134_217_728 });
    const message = failure({ cwd: workspace({ 'klym.config.yaml': 'upstreams:\n  files: { command: node, maxMessageBytes: 0 }\n' }) });
    expect(message).toContain('upstreams.files.maxMessageBytes');
    expect(message).toContain('(file klym.config.yaml)');
  });
});

describe('cross-key checks', () => {
  it('a non-loopback host needs tokens; a policy must exist', () => {
    expect(failure({ cwd: workspace(), env: { KLYM_SERVER_HOST: '0.0.0.0' } })).toContain(
      'server.host = "0.0.0.0": binding "0.0.0.0" (not loopback) needs `server.tokens` or `server.oauth` (env KLYM_SERVER_HOST)',
    );
    expect(
      resolveConfig({ cwd: workspace(), env: { KLYM_SERVER_HOST: '0.0.0.0', KLYM_SERVER_TOKENS: '{"grynya":"0123456789abcdef"}' } }).config.server.host,
    ).toBe('0.0.0.0');
    expect(failure({ cwd: workspace(), flags: [{ path: ['tools', 'policy'], value: 'careful', source: 'flag --policy' }] })).toContain(
      'tools.policy = "careful": expected `read-only` or a policy from `policies` (none) (flag --policy)',
    );
  });

  it('a dashboard admin must be a principal of the tokens', () => {
    const tokens = 'server:\n  tokens: { ops: 0123456789abcdef, grynya: fedcba9876543210 }\n';
    expect(failure({ cwd: workspace({ 'klym.config.yaml': `${tokens}  admins: [root]\n` }) })).toContain(
      'server.admins[0] = "root": expected a principal of `server.tokens` (ops, grynya) (file klym.config.yaml)',
    );
    const { config } = resolveConfig({ cwd: workspace({ 'klym.config.yaml': `${tokens}  admins: [ops]\n` }) });
    expect(serverOptions(config, '/').auth).toMatchObject({ admins: ['ops'] });
  });
});

/** A working directory whose config file has `server.oauth` lines `oauth`, after `server` lines. */
const file = (oauth: string, server = ''): string => workspace({ 'klym.config.yaml': `server:\n${server}  oauth:\n${oauth}` });
/** Resolves server options with `auth.oauth` of an issuer and `oauth`. */
const withOauth =
  (oauth: Record<string, unknown>, port = 8765) =>
  () =>
    resolveServerOptions({ port, auth: { oauth: { issuer: 'https://auth.example.com', ...oauth } } });

describe('server.oauth', () => {
  it('takes an issuer and fills in the rest; the server’s options carry it, the resource from the listen address', () => {
    const { config } = resolveConfig({ cwd: file('    issuer: https://auth.example.com/realms/klym\n') });
    expect(config.server.oauth).toEqual({
      issuer: 'https://auth.example.com/realms/klym',
      principalClaim: 'sub',
      scopes: { start: 'klym:start', read: 'klym:read', cancel: 'klym:cancel' },
      clockToleranceSeconds: 30,
    });
    const options = resolveServerOptions(serverOptions(config, '/srv'));
    expect(options.auth?.oauth).toMatchObject({
      issuer: 'https://auth.example.com/realms/klym',
      resource: 'http://127.0.0.1:8765/mcp',
      audience: 'http://127.0.0.1:8765/mcp',
    });
    expect(options.auth?.oauth?.resourceMetadataUrl).toBe('http://127.0.0.1:8765/.well-known/oauth-protected-resource/mcp');
    // `klym worker` listens elsewhere, and takes the server's tokens on its /metrics.
    const worker = resolveServerOptions({ ...serverOptions(config, '/srv'), host: config.worker.host, port: 0 });
    expect(worker.auth?.oauth?.audience).toBe('http://127.0.0.1:8765/mcp');
    // Every leaf has its variable.
    const fromEnv = resolveConfig({
      cwd: workspace(),
      env: { KLYM_SERVER_OAUTH_ISSUER: 'https://auth.example.com', KLYM_SERVER_OAUTH_SCOPES_START: 'tasks:write' },
    });
    expect(fromEnv.config.server.oauth?.scopes).toEqual({ start: 'tasks:write', read: 'klym:read', cancel: 'klym:cancel' });
  });

  it('refuses an issuer that is not an https URL (http only on loopback), naming the key and the source', () => {
    expect(failure({ cwd: file('    issuer: auth.example.com\n') })).toContain(
      'server.oauth.issuer = "auth.example.com": expected an https URL (http only on a loopback host such as 127.0.0.1) (file klym.config.yaml)',
    );
    expect(failure({ cwd: workspace(), env: { KLYM_SERVER_OAUTH_ISSUER: 'http://auth.example.com' } })).toContain(
      'server.oauth.issuer = "http://auth.example.com": expected an https URL',
    );
    expect(resolveConfig({ cwd: file('    issuer: http://127.0.0.1:9000\n') }).config.server.oauth?.issuer).toBe('http://127.0.0.1:9000');
    expect(failure({ cwd: file('    issuer: https://auth.example.com\n    scopes: { start: "klym start" }\n') })).toContain(
      'server.oauth.scopes.start = "klym start": expected a scope token',
    );
    expect(failure({ cwd: file('    issuer: https://auth.example.com\n    resource: klym.example.com/mcp\n') })).toContain(
      'server.oauth.resource = "klym.example.com/mcp": expected an http(s) URL without a fragment',
    );
    expect(failure({ cwd: file('    issuer: https://auth.example.com\n    audiance: klym\n') })).toContain(
      'server.oauth.audiance: unknown key (did you mean "audience"?)',
    );
  });

  it('needs `resource` where the listen address cannot be it; with it, serves a non-loopback address without static tokens', () => {
    expect(failure({ cwd: file('    issuer: https://auth.example.com\n', '  port: 0\n') })).toContain(
      "server.oauth.resource: required when the server listens on a free port (0): the URL clients reach Klym's /mcp at, which tokens are bound to",
    );
    expect(failure({ cwd: file('    issuer: https://auth.example.com\n', '  host: 0.0.0.0\n') })).toContain(
      'server.oauth.resource: required when the server listens on "0.0.0.0"',
    );
    const { config } = resolveConfig({ cwd: file('    issuer: https://auth.example.com\n    resource: https://klym.example.com/mcp\n', '  host: 0.0.0.0\n') });
    expect(resolveServerOptions(serverOptions(config, '/srv')).auth?.oauth?.audience).toBe('https://klym.example.com/mcp');
  });

  it('options passed in code get the same checks, each naming its option', () => {
    expect(withOauth({ issuer: 'ftp://auth.example.com' })).toThrow(
      'Expected `auth.oauth.issuer` to be an https URL (http only on a loopback host), got "ftp://auth.example.com"',
    );
    expect(withOauth({ resource: 'https://klym.example.com/mcp#frag' })).toThrow(
      'Expected `auth.oauth.resource` to be an http(s) URL without a fragment, got "https://klym.example.com/mcp#frag"',
    );
    expect(withOauth({ clockToleranceSeconds: -1 })).toThrow('Expected `auth.oauth.clockToleranceSeconds` to be a number of seconds, 0 or more, got -1');
    expect(withOauth({}, 0)).toThrow('`auth.oauth.resource` is required when the server listens on a free port (0)');
  });
});
