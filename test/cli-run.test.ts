// `klym run "prompt"`: the real CLI against the fake grynya started here, with the offline `scripted` model.
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { createFakeGrynya, type FakeGrynya } from '@klym/fake-grynya';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runKlym, startKlym, temporaryDirectory } from './cli-harness.ts';
import { freePort } from './support/upstream-servers.ts';

const OK = 'Бачу базу та інструменти, полет нормальний';
const FIXTURE = path.resolve(import.meta.dirname, 'support/stdio-fixture-server.ts');

interface RunJson {
  status: string;
  text: string;
  finishReason: string;
  steps: number;
  usage: { totalTokens: number };
  costUsd: number | null;
  toolCalls: { toolName: string; ok: boolean }[];
  model: string;
  error?: { code: string; message: string };
}

let grynya: FakeGrynya;
const cwd = temporaryDirectory();
beforeAll(async () => {
  grynya = await createFakeGrynya({ allowedHosts: ['localhost'] });
});
afterAll(async () => {
  await grynya?.close();
  cwd[Symbol.dispose]();
});

const upstream = (): string[] => [
  '--upstream',
  `grynya=${grynya.sseUrl}`,
  '--set',
  'upstreams.grynya.transport=sse',
  '--set',
  'upstreams.grynya.headers={"Host":"localhost"}',
];

describe('klym run', () => {
  it('prints the final JSON on stdout and exits 0; piped, stderr stays empty', async () => {
    const before = grynya.stats.calls.query_graph ?? 0;
    const { code, stdout, stderr } = await runKlym(['run', 'Check that you see the graph', ...upstream()], { cwd: cwd.path });
    expect({ code, stderr }).toEqual({ code: 0, stderr: '' });
    const result = JSON.parse(stdout) as RunJson;
    expect(result).toMatchObject({ status: 'completed', finishReason: 'stop', model: 'scripted', costUsd: 0 });
    expect(result.text).toContain(OK);
    expect(result.steps).toBeGreaterThanOrEqual(2);
    expect(result.usage.totalTokens).toBeGreaterThan(0);
    expect(result.toolCalls).toContainEqual(expect.objectContaining({ toolName: 'grynya__query_graph', ok: true }));
    expect(grynya.stats.calls.query_graph).toBe(before + 1);
  });

  it('shows live progress on stderr with --progress (as on a terminal), the JSON still alone on stdout', async () => {
    const { code, stdout, stderr } = await runKlym(['run', 'self-check', '--progress', ...upstream()], { cwd: cwd.path });
    expect(code).toBe(0);
    expect((JSON.parse(stdout) as RunJson).text).toContain(OK);
    expect(stderr).toMatch(/^klym · model scripted · \d+ tools/m);
    expect(stderr).toContain('klym · step 1 · calling grynya__query_graph');
    expect(stderr).toMatch(/klym · step 1 · done · \d+ tokens so far/);
    expect(stderr).toMatch(/klym · finished: stop · \d+ tokens/);
  });

  it('does not claim all is well when the database is disconnected', async () => {
    grynya.faults.dbDisconnected = true;
    try {
      const { code, stdout } = await runKlym(['run', 'self-check', ...upstream()], { cwd: cwd.path });
      expect(code).toBe(0);
      const result = JSON.parse(stdout) as RunJson;
      expect(result.text).not.toContain(OK);
      expect(result.text).toMatch(/grynya/);
    } finally {
      grynya.faults.dbDisconnected = false;
    }
  });

  it('with an upstream down, ends the run (exit 0) and says so: the JSON’s unavailable and one line on stderr name it', async () => {
    const down = `http://127.0.0.1:${await freePort()}/sse`;
    const { code, stdout, stderr } = await runKlym(['run', 'self-check', '--upstream', `grynya=${down}`, '--set', 'upstreams.grynya.transport=sse'], {
      cwd: cwd.path,
    });
    expect(code).toBe(0);
    const result = JSON.parse(stdout) as RunJson & { unavailable: { upstream: string; error: string }[] };
    expect(result).toMatchObject({ status: 'completed', unavailable: [{ upstream: 'grynya', error: expect.stringMatching(/grynya/) }] });
    expect(result.text).toMatch(/^Self-check failed/);
    expect(stderr).toMatch(/^klym: upstream grynya was unavailable; the run went on without it: .+$/m);
  });

  it('ends on a budget with the partial result and finishReason budget:steps, exit 0', async () => {
    const { code, stdout } = await runKlym(['run', 'self-check', '--max-steps', '1', ...upstream()], { cwd: cwd.path });
    expect(code).toBe(0);
    expect(JSON.parse(stdout)).toMatchObject({ status: 'completed', finishReason: 'budget:steps', steps: 1 });
  });

  it('writes upstream log messages to stderr as [upstream level] message (a stdio upstream from the config file)', async () => {
    using directory = temporaryDirectory();
    writeFileSync(path.join(directory.path, 'klym.config.json'), JSON.stringify({ mcpServers: { fixture: { command: process.execPath, args: [FIXTURE] } } }));
    const { code, stdout, stderr } = await runKlym(['run', 'self-check'], { cwd: directory.path });
    expect(code).toBe(0);
    expect(stderr).toMatch(/^\[fixture info\] stdio fixture ready, pid \d+$/m);
    expect((JSON.parse(stdout) as RunJson).toolCalls).toContainEqual(expect.objectContaining({ toolName: 'fixture__pid', ok: true }));
  });

  it('exits 1 with one line on stderr and nothing on stdout for a configuration or usage error', async () => {
    const invalid = await runKlym(['run', 'x'], { cwd: cwd.path, env: { KLYM_BUDGET_DEFAULT_MAX_STEPS: 'many' } });
    expect(invalid).toMatchObject({ code: 1, stdout: '' });
    expect(invalid.stderr).toBe(
      'klym: Invalid configuration: budget.default.maxSteps = "many": expected number, received string (env KLYM_BUDGET_DEFAULT_MAX_STEPS)\n',
    );

    const keyless = await runKlym(['run', 'x', '--model', 'openai:gpt-4.1-mini'], { cwd: cwd.path });
    expect(keyless).toMatchObject({ code: 1, stdout: '' });
    expect(keyless.stderr).toMatch(
      /^klym: Invalid configuration: llm\.model = "openai:gpt-4\.1-mini": needs an API key for the openai provider: set OPENAI_API_KEY.* \(flag --model\)\n$/,
    );

    const usage = await runKlym(['run'], { cwd: cwd.path });
    expect(usage).toMatchObject({ code: 1, stdout: '', stderr: 'klym: Expected a prompt: klym run "what to do" (see `klym run --help`)\n' });
  });

  it('exits 2 with the error as JSON and one line on stderr when the model fails, never showing the key', async () => {
    const closedPort = await freePort(); // free a moment ago: nothing listens, connections are refused
    const secret = 'sk-sentinel-5d1e0c';
    const { code, stdout, stderr } = await runKlym(
      ['run', 'hello', '--model', 'compatible:llama3', '--set', `llm.baseURL=http://127.0.0.1:${closedPort}/v1`, '--set', 'llm.maxRetries=0'],
      {
        cwd: cwd.path,
        env: { KLYM_LLM_API_KEY: secret },
      },
    );
    expect(code).toBe(2);
    const result = JSON.parse(stdout) as RunJson;
    expect(result.status).toBe('error');
    expect(result.error?.code).toBe('MODEL_ERROR');
    expect(stderr.trimEnd().split('\n')).toHaveLength(1);
    expect(stderr).toMatch(/^klym: MODEL_ERROR: /);
    expect(stdout + stderr).not.toContain(secret);
  });

  it("with llm.contextWindows, a prompt longer than the model's window is never sent: exit 2, CONTEXT_OVERFLOW naming the window", async () => {
    const closedPort = await freePort(); // nothing listens: a request sent would fail as MODEL_ERROR
    const prompt = `Count the words: ${'word '.repeat(2_000)}`;
    const { code, stdout, stderr } = await runKlym(
      [
        'run',
        prompt,
        '--model',
        'compatible:llama3',
        '--set',
        `llm.baseURL=http://127.0.0.1:${closedPort}/v1`,
        '--set',
        'llm.contextWindows={"compatible:llama3":1000}',
      ],
      { cwd: cwd.path },
    );
    expect(code).toBe(2);
    const result = JSON.parse(stdout) as RunJson;
    expect(result.error?.code).toBe('CONTEXT_OVERFLOW');
    expect(result.error?.message).toMatch(
      /^The request to model compatible:llama3 would take \d+ tokens \(estimated\), more than its context window of 1000 tokens \(configured\) less 100 kept for the answer; it was not sent$/,
    );
    expect(stderr).toMatch(/^klym: CONTEXT_OVERFLOW: /);
  });

  it('on SIGINT cancels the run in flight, prints the partial result and exits 130', async () => {
    grynya.faults.hang = true;
    try {
      const klym = startKlym(['run', 'self-check', '--progress', ...upstream()], { cwd: cwd.path });
      await klym.waitFor(/calling grynya__query_graph/, 'stderr');
      klym.child.kill('SIGINT');
      const { code, stdout, stderr } = await klym.exited();
      expect(code).toBe(130);
      expect(JSON.parse(stdout)).toMatchObject({ status: 'cancelled', finishReason: 'cancelled' });
      expect(stderr).toContain('klym: the run was interrupted');
    } finally {
      grynya.faults.hang = false;
    }
  });
});
