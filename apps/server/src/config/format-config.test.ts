import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { formatConfigJson, formatConfigYaml } from './format-config.ts';
import { redactUrl } from './redact.ts';
import { defaultConfig, resolveConfig } from './resolve-config.ts';

const cwd = mkdtempSync(path.join(tmpdir(), 'klym-format-'));
afterAll(() => rmSync(cwd, { recursive: true, force: true }));

const SECRET = 'sentinel-7f3a9c';

describe('the default configuration', () => {
  it('serializes exactly as the golden file says (change it deliberately: `pnpm vitest run -u`)', async () => {
    await expect(stringify(defaultConfig())).toMatchFileSnapshot('./default-config.golden.yaml');
  });

  it('is what an empty configuration resolves to', () => {
    expect(resolveConfig({ cwd }).config).toEqual(defaultConfig());
  });
});

describe('klym config output', () => {
  const resolved = resolveConfig({
    cwd,
    env: {
      OPENAI_API_KEY: SECRET,
      KLYM_SERVER_TOKENS: JSON.stringify({ grynya: `${SECRET}-0123456789` }),
      KLYM_UPSTREAMS: JSON.stringify({
        grynya: {
          url: `http://user:${SECRET}@127.0.0.1:8000/sse?token=${SECRET}&db=main`,
          headers: { Authorization: `Bearer ${SECRET}`, 'X-Api-Key': SECRET, Host: 'localhost' },
        },
        memory: { command: 'node', env: { GITHUB_TOKEN: SECRET, MEMORY_FILE_PATH: '/tmp/memory.json' } },
      }),
    },
    flags: [{ path: ['server', 'port'], value: '9100', source: 'flag --port' }],
  });

  it('YAML: redacts every secret, keeps the rest, and names each value’s source', () => {
    const text = formatConfigYaml(resolved);
    expect(text).not.toContain(SECRET);
    expect(text).toContain('port: 9100 # flag --port');
    expect(text).toContain('apiKey: <redacted> # env OPENAI_API_KEY');
    expect(text).toContain('grynya: <redacted> # env KLYM_SERVER_TOKENS');
    expect(text).toContain('Host: localhost # env KLYM_UPSTREAMS');
    expect(text).toContain('MEMORY_FILE_PATH: /tmp/memory.json # env KLYM_UPSTREAMS');
    expect(text).toContain('model: scripted # default');
    expect(text).toContain('allowedHosts: [] # default');
    // It is YAML a person could start a config file from.
    expect(parse(text)).toMatchObject({ server: { port: 9100 }, upstreams: { grynya: { headers: { Host: 'localhost', Authorization: '<redacted>' } } } });
  });

  it('JSON: the redacted configuration and a source for every value', () => {
    const report = JSON.parse(formatConfigJson(resolved)) as { config: { upstreams: { grynya: { url: string } } }; sources: Record<string, string> };
    expect(JSON.stringify(report)).not.toContain(SECRET);
    expect(report.config.upstreams.grynya.url).toBe('http://user:redacted@127.0.0.1:8000/sse?token=redacted&db=main');
    expect(report.sources).toMatchObject({
      'server.port': 'flag --port',
      'llm.providers.openai.apiKey': 'env OPENAI_API_KEY',
      'upstreams.memory.env.GITHUB_TOKEN': 'env KLYM_UPSTREAMS',
      'tasks.ttlMs': 'default',
    });
  });
});

describe('redactUrl', () => {
  it('leaves a URL without secrets untouched and is not fooled by text that is not a URL', () => {
    expect(redactUrl('http://grynya-mcp-server:8000/sse')).toBe('http://grynya-mcp-server:8000/sse');
    expect(redactUrl('not a url token=1')).toBe('not a url token=1');
    expect(redactUrl('https://api.example.com/v1?api_key=abc&key=def')).toBe('https://api.example.com/v1?api_key=redacted&key=redacted');
  });
});
