import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { runCli, type CliIo } from './cli.ts';
import { parseCommand } from './parse-command.ts';

const cwd = mkdtempSync(path.join(tmpdir(), 'klym-cli-'));
afterAll(() => rmSync(cwd, { recursive: true, force: true }));

/** Runs the CLI in this process, with its output captured. */
async function klym(argv: string[], io: Partial<CliIo> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const code = await runCli(argv, {
    cwd,
    env: {},
    ...io,
    stdout: { write: (text: string) => (stdout += text) },
    stderr: { write: (text: string) => (stderr += text) },
  });
  return { code, stdout, stderr };
}

describe('klym --help', () => {
  it('lists every command, short', async () => {
    const { code, stdout } = await klym(['--help']);
    expect(code).toBe(0);
    for (const command of ['serve', 'serve --stdio', 'worker', 'run "PROMPT"', 'config', 'help [COMMAND]']) expect(stdout).toContain(`  ${command}`);
    expect(stdout.split('\n').length).toBeLessThan(20);
  });

  it.each(['serve', 'worker', 'run', 'config'])('`klym %s --help` names every option the command accepts, in lines a terminal shows whole', async (command) => {
    const { code, stdout } = await klym([command, '--help']);
    expect(code).toBe(0);
    expect(stdout).toMatch(new RegExp(`^Usage: klym ${command}`));
    expect(stdout.split('\n').length).toBeLessThan(50);
    expect(stdout.split('\n').filter((row) => row.length > 100)).toEqual([]);
    // Every option in the help text is one the parser takes, and every option it takes is in the help.
    const named = [...stdout.matchAll(/(?<![\w-])--([a-z][a-z-]*)/g)].map((match) => match[1] as string).filter((option) => !['klym', 'help'].includes(option));
    for (const option of new Set(named)) {
      const argv = [
        command,
        ...(command === 'run' ? ['p'] : []),
        `--${option}`,
        ...(['stdio', 'json', 'progress', 'no-progress'].includes(option) ? [] : ['1']),
      ];
      expect(() => parseCommand(argv)).not.toThrow(/Unknown option/);
    }
    const accepted =
      {
        serve: ['stdio', 'host', 'port'],
        worker: ['host', 'port'],
        run: ['system-prompt', 'max-steps', 'max-tokens', 'max-cost-usd', 'timeout-ms', 'allow', 'deny', 'policy', 'progress', 'no-progress'],
        config: ['json'],
      }[command] ?? [];
    expect([...accepted, 'config', 'set', 'upstream', 'model', 'log-level'].filter((option) => !named.includes(option))).toEqual([]);
  });

  it('`klym help run` is `klym run --help`; an unknown command exits 1 with one line', async () => {
    expect((await klym(['help', 'run'])).stdout).toBe((await klym(['run', '--help'])).stdout);
    const unknown = await klym(['deploy']);
    expect(unknown).toEqual({ code: 1, stdout: '', stderr: 'klym: Unknown command "deploy" (see `klym --help`)\n' });
  });
});

describe('klym config', () => {
  it('prints the effective configuration as YAML with each value’s source, and secrets redacted', async () => {
    writeFileSync(
      path.join(cwd, 'klym.config.yaml'),
      'llm:\n  model: openai:gpt-4.1-mini\nupstreams:\n  grynya: { url: "http://127.0.0.1:8000/sse", headers: { Authorization: "Bearer file-secret-123" } }\n',
    );
    const { code, stdout, stderr } = await klym(['config', '--port', '9200'], { env: { OPENAI_API_KEY: 'sk-env-secret', KLYM_TASKS_CONCURRENCY: '9' } });
    expect({ code, stderr }).toEqual({ code: 0, stderr: '' });
    expect(stdout).toContain('model: openai:gpt-4.1-mini # file klym.config.yaml');
    expect(stdout).toContain('concurrency: 9 # env KLYM_TASKS_CONCURRENCY');
    expect(stdout).toContain('port: 9200 # flag --port');
    expect(stdout).toContain('ttlMs: 3600000 # default');
    expect(stdout).not.toMatch(/file-secret-123|sk-env-secret/);
    expect(parse(stdout)).toMatchObject({ server: { port: 9200 }, llm: { providers: { openai: { apiKey: '<redacted>' } } } });
    rmSync(path.join(cwd, 'klym.config.yaml'));
  });

  it('--json gives the configuration and a source per key', async () => {
    const { code, stdout } = await klym(['config', '--json', '--set', 'server.allowedHosts=klym,grynya']);
    expect(code).toBe(0);
    const report = JSON.parse(stdout) as { config: { server: { allowedHosts: string[] } }; sources: Record<string, string> };
    expect(report.config.server.allowedHosts).toEqual(['klym', 'grynya']);
    expect(report.sources['server.allowedHosts']).toBe('flag --set server.allowedHosts');
  });

  it('an invalid configuration exits 1 with one line naming the key, the fault and the source', async () => {
    const { code, stdout, stderr } = await klym(['config'], { env: { KLYM_SERVER_PORT: '-1' } });
    expect({ code, stdout }).toEqual({ code: 1, stdout: '' });
    expect(stderr).toBe('klym: Invalid configuration: server.port = -1: Too small: expected number to be >=0 (env KLYM_SERVER_PORT)\n');
  });
});
