// `klym config` and `klym --help` as a person runs them: the real process, its real environment and files.
import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { runKlym, temporaryDirectory } from './cli-harness.ts';

describe('klym config (real process)', () => {
  it('layers the desktop client’s mcpServers file, the environment and flags, redacts secrets and names every source', async () => {
    using cwd = temporaryDirectory();
    writeFileSync(
      path.join(cwd.path, 'claude_desktop_config.json'),
      JSON.stringify({
        mcpServers: { memory: { command: 'npx', args: ['-y', '@modelcontextprotocol/server-memory'], env: { API_TOKEN: 'file-secret-4e2b' } } },
      }),
    );
    const { code, stdout, stderr } = await runKlym(['config', '--config', 'claude_desktop_config.json', '--max-steps', '9'], {
      cwd: cwd.path,
      env: { GOOGLE_GENERATIVE_AI_API_KEY: 'env-secret-9a7c', KLYM_LLM_MODEL: 'google:gemini-2.5-flash' },
    });
    expect({ code, stderr }).toEqual({ code: 0, stderr: '' });
    expect(stdout).not.toMatch(/file-secret-4e2b|env-secret-9a7c/);
    expect(stdout).toContain('command: npx # file claude_desktop_config.json');
    expect(stdout).toContain('API_TOKEN: <redacted> # file claude_desktop_config.json');
    expect(stdout).toContain('model: google:gemini-2.5-flash # env KLYM_LLM_MODEL');
    expect(stdout).toContain('apiKey: <redacted> # env GOOGLE_GENERATIVE_AI_API_KEY');
    expect(stdout).toContain('maxSteps: 9 # flag --max-steps');
  });

  it('exits 1 on an unknown KLYM_ variable, suggesting the one meant', async () => {
    using cwd = temporaryDirectory();
    const { code, stdout, stderr } = await runKlym(['config'], { cwd: cwd.path, env: { KLYM_LLM_MODLE: 'scripted' } });
    expect({ code, stdout }).toEqual({ code: 1, stdout: '' });
    expect(stderr).toBe('klym: Unknown configuration variable KLYM_LLM_MODLE (from env); did you mean KLYM_LLM_MODEL?\n');
  });

  it('`klym --help` and `klym serve --help` exit 0 with the usage on stdout', async () => {
    using cwd = temporaryDirectory();
    const general = await runKlym(['--help'], { cwd: cwd.path });
    expect(general).toMatchObject({ code: 0, stderr: '' });
    expect(general.stdout).toContain('Usage: klym <command> [options]');
    const serve = await runKlym(['serve', '--help'], { cwd: cwd.path });
    expect(serve).toMatchObject({ code: 0, stderr: '' });
    expect(serve.stdout).toMatch(/^Usage: klym serve \[--stdio\]/);
  });

  it("runs as the package's bin: the file itself is executable and finds Klym's sources from any directory", async () => {
    using cwd = temporaryDirectory();
    const bin = path.resolve(import.meta.dirname, '../apps/server/src/main.ts');
    const { stdout } = await promisify(execFile)(bin, ['config', '--json'], { cwd: cwd.path, env: { PATH: process.env.PATH ?? '' } });
    expect(JSON.parse(stdout)).toMatchObject({ config: { server: { port: 8765 } } });
  });
});
