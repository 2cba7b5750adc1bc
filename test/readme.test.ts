// README.md is what a newcomer trusts first: its two commands must be the ones CI runs, and its short
// configuration must be one Klym accepts, as must the complete example in docs/configuration.md.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { resolveConfig } from '../apps/server/src/config/resolve-config.ts';

const root = path.resolve(import.meta.dirname, '..');
const readme = readFileSync(path.join(root, 'README.md'), 'utf8');
const configurationPage = readFileSync(path.join(root, 'docs/configuration.md'), 'utf8');
const firstYamlBlock = (markdown: string): string => (markdown.match(/```yaml\n([\s\S]*?)```/) as RegExpMatchArray)[1] as string;
const work = mkdtempSync(path.join(tmpdir(), 'klym-readme-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

describe('README.md and docs/configuration.md', () => {
  it('gives a complete configuration example that Klym accepts, every section of the schema in it', () => {
    const example = firstYamlBlock(configurationPage);
    const file = path.join(work, 'klym.config.yaml');
    writeFileSync(file, example);
    const { config, sourceOf } = resolveConfig({ cwd: work, env: { OPENAI_API_KEY: 'sk-readme-example-key' }, configFile: file });
    expect(Object.keys(config.upstreams).toSorted()).toEqual(['grynya', 'memory', 'search']);
    expect(config.llm.model).toBe('openai:gpt-4.1-mini');
    expect(config.writeBack.enabled).toBe(true);
    expect(config.tasks).toMatchObject({ store: 'sqlite:.klym/tasks.db', resumeOnRestart: true });
    for (const key of [
      'upstreams.grynya.url',
      'llm.model',
      'systemPrompt',
      'budget.max.maxSteps',
      'tasks.concurrency',
      'tasks.store',
      'tasks.resumeOnRestart',
      'tools.deny',
      'writeBack.enabled',
      'webhooks.ops.url',
      'webhooks.ops.secret',
      'logging.level',
      'server.port',
    ]) {
      expect({ key, source: sourceOf(key.split('.')) }).toMatchObject({ source: expect.stringMatching(/^file /) });
    }
  });

  it("gives a short configuration in README's tour that Klym accepts", () => {
    const file = path.join(work, 'klym.readme.yaml');
    writeFileSync(file, firstYamlBlock(readme));
    const { config, sourceOf } = resolveConfig({ cwd: work, env: { OPENAI_API_KEY: 'sk-readme-example-key' }, configFile: file });
    expect(config.upstreams.grynya).toMatchObject({ url: 'http://grynya-mcp-server:8000/sse', transport: 'sse' });
    expect(config.llm.model).toBe('openai:gpt-4.1-mini');
    expect(sourceOf(['server', 'tokens'])).toMatch(/^file /);
  });

  it('names the two commands that CI runs', () => {
    expect(readme).toContain('bash scripts/run.sh start');
    expect(readme).toContain('bash scripts/run.sh test');
    expect(readFileSync(path.join(root, '.ci/run'), 'utf8')).toContain('bash scripts/run.sh test');
  });
});
