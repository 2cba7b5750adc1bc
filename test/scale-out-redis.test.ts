// Issue #13 with real processes, around Redis itself: an outage under a front and two workers, the settings Klym
// warns about at start, and what `klym` refuses without Redis — a password in the Redis URL never printed.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { runKlym, temporaryDirectory } from './cli-harness.ts';
import { startRedisServer } from './support/redis-server.ts';
import { OWNER, alive, startScaleOut, startTask, statusOf, type Front } from './support/scale-out.ts';

const PASSWORD = 'correct-horse-battery-staple-42';

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).toReversed()) await cleanup().catch(() => {});
});

const ended = (front: Front, id: string): Promise<Record<string, unknown>> =>
  vi.waitFor(
    async () => {
      const status = await statusOf(front, id);
      if (!['completed', 'error', 'cancelled'].includes(String(status.status))) throw new Error(`task ${id} is still ${String(status.status)}`);
      return status;
    },
    { timeout: 15_000, interval: 100 },
  );

describe('Klym processes when Redis goes away and comes back', () => {
  it('answers STORE_UNAVAILABLE over REST and MCP while Redis is down, crashes nowhere, reconnects by itself, and keeps finished tasks', async () => {
    const redis = await startRedisServer({ args: ['--requirepass', PASSWORD] });
    cleanups.push(() => redis.close());
    const fleet = await startScaleOut({ redis, url: `redis://:${PASSWORD}@127.0.0.1:${redis.port}/0` });
    cleanups.push(() => fleet.close());
    const front = await fleet.front();
    const workers = await Promise.all([fleet.worker(), fleet.worker()]);
    const before = await startTask(front, 'Say done: quick-1');
    expect(await ended(front, before)).toMatchObject({ status: 'completed', result: 'Done: quick-1.' });
    const client = new Client({ name: 'grynya', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${front.url}/mcp`), { requestInit: { headers: { Authorization: `Bearer ${OWNER}` } } }));
    cleanups.push(() => client.close());

    await redis.stop();
    const where = `127.0.0.1:${redis.port}/0`;
    const escaped = where.replaceAll('.', '\\.');
    expect(await front.api('/api/tasks', { prompt: 'Say done: quick-2' })).toMatchObject({
      status: 503,
      json: { error: { code: 'STORE_UNAVAILABLE', message: expect.stringContaining(where) } },
    });
    const overMcp = await client.callTool({ name: 'start_async_agent_task', arguments: { prompt: 'Say done: quick-3' } });
    expect(overMcp).toMatchObject({ isError: true, structuredContent: { error: { code: 'STORE_UNAVAILABLE', message: expect.stringContaining(where) } } });
    expect(await front.api(`/api/tasks/${before}`)).toMatchObject({
      status: 503,
      json: {
        error: {
          code: 'STORE_UNAVAILABLE',
          message: expect.stringMatching(new RegExp(`Redis task store at ${escaped} is unreachable .*could not read task ${before}`)),
        },
      },
    });
    expect(fleet.processes.filter(alive)).toHaveLength(3);

    // Started again on its port and directory: its append-only file brings back what was answered.
    await redis.restart();
    for (const worker of workers) await worker.waitFor(/The task queue reached Redis at .+ again/, 'stderr');
    const after = await vi.waitFor(() => startTask(front, 'Say done: quick-4'), { timeout: 15_000, interval: 200 });
    expect(await ended(front, after)).toMatchObject({ status: 'completed', result: 'Done: quick-4.' });
    expect(await statusOf(front, before)).toMatchObject({ status: 'completed', result: 'Done: quick-1.' });
    const overMcpAgain = await client.callTool({ name: 'check_task_status', arguments: { task_id: before } });
    expect(overMcpAgain).toMatchObject({ structuredContent: { status: 'completed' } });

    expect(fleet.processes.filter(alive)).toHaveLength(3);
    expect(front.klym.stderr()).toMatch(new RegExp(`lost Redis at ${escaped} \\(.+\\); it reconnects by itself`));
    for (const klym of fleet.processes) expect(klym.stdout() + klym.stderr()).not.toContain(PASSWORD);
  }, 60_000);
});

describe('Klym and the settings of its Redis', () => {
  it('warns at start about appendonly and an evicting maxmemory-policy, and says nothing with the recommended settings', async () => {
    const risky = await startRedisServer({ appendonly: 'no', maxmemoryPolicy: 'allkeys-lru' });
    cleanups.push(() => risky.close());
    const recommended = await startRedisServer();
    cleanups.push(() => recommended.close());
    const [warned, quiet] = await Promise.all([startScaleOut({ redis: risky }), startScaleOut({ redis: recommended })]);
    cleanups.push(
      () => warned.close(),
      () => quiet.close(),
    );
    const [riskyFront, riskyWorker, calmFront] = await Promise.all([warned.front(), warned.worker(), quiet.front()]);

    for (const klym of [riskyFront.klym, riskyWorker]) {
      await klym.waitFor(/maxmemory-policy/, 'stderr');
      expect(klym.stderr()).toMatch(/klym: Redis has appendonly no: .*\(Klym needs appendonly yes\)/);
      expect(klym.stderr()).toMatch(/klym: Redis has maxmemory-policy allkeys-lru: .*\(Klym needs maxmemory-policy noeviction\)/);
    }
    calmFront.klym.child.kill('SIGTERM');
    const exit = await calmFront.klym.exited();
    expect(exit.code).toBe(0);
    expect(exit.stderr).not.toMatch(/appendonly|maxmemory-policy/);
  });

  it('refuses klym worker, and a front only, without a Redis store, in one line; never prints the password of a Redis URL', async () => {
    const redis = await startRedisServer({ args: ['--requirepass', PASSWORD] });
    cleanups.push(() => redis.close());
    const directory = temporaryDirectory();
    cleanups.push(async () => directory[Symbol.dispose]());
    const cwd = directory.path;

    expect(await runKlym(['worker', '--port', '0'], { cwd })).toMatchObject({
      code: 1,
      stdout: '',
      stderr: expect.stringMatching(/^klym: Expected a Redis `tasks.store` \(redis:\/\/host:port\/db\) for `klym worker`[^\n]*\n$/),
    });
    expect(await runKlym(['serve', '--set', 'tasks.concurrency=0', '--port', '0'], { cwd })).toMatchObject({
      code: 1,
      stdout: '',
      stderr: expect.stringMatching(/^klym: Invalid configuration: tasks\.concurrency = 0: [^\n]*Redis `tasks.store`[^\n]*\n$/),
    });

    const wrong = `redis://:wrong-${PASSWORD}@127.0.0.1:${redis.port}/0`;
    const right = `redis://:${PASSWORD}@127.0.0.1:${redis.port}/0`;
    for (const command of ['worker', 'serve']) {
      const refused = await runKlym([command, '--port', '0', '--set', `tasks.store=${wrong}`], { cwd });
      expect(refused).toMatchObject({ code: 1, stdout: '' });
      expect(refused.stderr).toMatch(new RegExp(`^klym: The Redis task store at 127\\.0\\.0\\.1:${redis.port}/0 cannot be used: [^\\n]*WRONGPASS[^\\n]*\\n$`));
      expect(refused.stderr).not.toContain(PASSWORD);
    }
    const shown = await runKlym(['config', '--set', `tasks.store=${right}`], { cwd });
    expect(shown.code).toBe(0);
    expect(shown.stdout).toContain(`store: redis://:redacted@127.0.0.1:${redis.port}/0`);
    expect(shown.stdout + shown.stderr).not.toContain(PASSWORD);
  });
});
