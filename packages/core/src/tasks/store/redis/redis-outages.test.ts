import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { startRedisServer, type RedisServer, type RedisServerOptions } from '../../../../../../test/support/redis-server.ts';
import { freePort } from '../../../../../../test/support/upstream-servers.ts';
import { checkpointOf, taskRecord, userMessage } from '../../../../../../test/support/task-fixtures.ts';
import { KlymError } from '../../../errors.ts';
import { createRedisTaskStore, type RedisTaskStoreOptions } from './redis-task-store.ts';

const PASSWORD = 'pa55-w0rd-n0t-for-logs';

// Every failure must reach its caller: a promise of the store's that rejects unhandled is a bug.
const unhandled: unknown[] = [];
const onUnhandled = (reason: unknown): void => void unhandled.push(reason);
beforeAll(() => void process.on('unhandledRejection', onUnhandled));
afterAll(() => void process.off('unhandledRejection', onUnhandled));
afterEach(() => {
  if (unhandled.length > 0) throw new Error(`Unhandled rejections: ${unhandled.map(String).join('; ')}`);
});

const servers: RedisServer[] = [];
async function redisServer(options?: RedisServerOptions): Promise<RedisServer> {
  const server = await startRedisServer(options);
  servers.push(server);
  return server;
}
afterAll(async () => {
  await Promise.all(servers.map((server) => server.close()));
});

/** The error `promise` rejects with; fails the test when it resolves. */
async function failureOf(promise: Promise<unknown>): Promise<KlymError> {
  const error = await promise.then(
    () => new Error('expected a rejection'),
    (failure: unknown) => failure,
  );
  expect(error).toBeInstanceOf(KlymError);
  return error as KlymError;
}

async function warningsOf(url: string): Promise<readonly string[]> {
  await using store = await createRedisTaskStore({ url });
  return store.warnings;
}

/** The one-line STORE_UNAVAILABLE that `options` opening is refused with. */
async function refused(options: RedisTaskStoreOptions): Promise<string> {
  const error = await failureOf(createRedisTaskStore(options));
  expect(error.code).toBe('STORE_UNAVAILABLE');
  expect(error.message).not.toContain('\n');
  return error.message;
}

describe('createRedisTaskStore: Redis down and back', () => {
  it('rejects every call with STORE_UNAVAILABLE while Redis is down, and works again by itself once it is back', async () => {
    const server = await redisServer();
    await using store = await createRedisTaskStore({ url: server.url, prefix: 'down:' });
    await store.insert(taskRecord('t1', { status: 'running' }));
    store.appendLog('t1', 'task-start', { model: 'before' });
    await server.stop();

    const where = `127.0.0.1:${server.port}/0`;
    // Sent before the client saw the line close, a call fails as one whose answer was lost; after it, as unreachable.
    expect(await failureOf(store.counts())).toMatchObject({ code: 'STORE_UNAVAILABLE' });
    const failures = await Promise.all([
      failureOf(store.insert(taskRecord('t2'))),
      failureOf(store.get('t1')),
      failureOf(store.readLog('t1')),
      failureOf(store.saveCheckpoint('t1', checkpointOf([userMessage('m1')]))),
      failureOf(store.list()),
    ]);
    for (const failure of failures) {
      expect(failure.code).toBe('STORE_UNAVAILABLE');
      expect(failure.message).toContain(`The Redis task store at ${where}`);
    }
    expect(failures[1]?.message).toMatch(
      /unreachable \((the connection closed|connect ECONNREFUSED .*)\), so Klym could not read task t1; it reconnects by itself$/,
    );
    // Fire and forget: an entry appended while Redis is down is lost, and nothing throws.
    expect(() => store.appendLog('t1', 'task-start', { model: 'lost' })).not.toThrow();

    await server.restart();
    await vi.waitFor(async () => expect(await store.get('t1')).toMatchObject({ status: 'running' }), { timeout: 10_000, interval: 50 });
    store.appendLog('t1', 'task-start', { model: 'after' });
    await store.saveCheckpoint('t1', checkpointOf([userMessage('m1')]));
    expect((await store.readLog('t1')).entries.map((entry) => entry.data)).toEqual([{ model: 'before' }, { model: 'after' }]);
    expect(await store.loadCheckpoint('t1')).toEqual(checkpointOf([userMessage('m1')]));
  });

  it('rejects a call Redis does not answer after commandTimeoutMs, and answers again once Redis does', async () => {
    const server = await redisServer();
    await using store = await createRedisTaskStore({ url: server.url, prefix: 'hung:', commandTimeoutMs: 300 });
    await store.insert(taskRecord('t1'));
    server.child().kill('SIGSTOP');
    try {
      const failure = await failureOf(store.transition('t1', ['pending'], { status: 'running' }));
      expect(failure).toMatchObject({
        code: 'STORE_UNAVAILABLE',
        message: expect.stringMatching(/did not answer within 300 ms: Klym asked it to change task t1, which may or may not have been done/),
      });
    } finally {
      server.child().kill('SIGCONT');
    }
    // The transition reached Redis after all: its outcome was unknown, not a failure.
    await vi.waitFor(async () => expect(await store.get('t1')).toMatchObject({ status: 'running' }), { timeout: 10_000, interval: 50 });
  });

  it('rejects a call in flight when Redis dies, and never sends it again', async () => {
    const server = await redisServer();
    await using store = await createRedisTaskStore({ url: server.url, prefix: 'lost:' });
    await store.insert(taskRecord('t1'));
    server.child().kill('SIGSTOP');
    const inFlight = failureOf(store.transition('t1', ['pending'], { status: 'running' }));
    await server.stop({ hard: true });
    expect(await inFlight).toMatchObject({
      code: 'STORE_UNAVAILABLE',
      message: expect.stringMatching(/lost its connection \(.+\) before it answered: Klym asked it to change task t1, which may or may not have been done$/),
    });
    await server.restart();
    // Replaying it after the reconnect would apply a compare-and-set whose caller was told it failed.
    await vi.waitFor(async () => expect(await store.get('t1')).toMatchObject({ status: 'pending' }), { timeout: 10_000, interval: 50 });
    expect(await store.transition('t1', ['pending'], { status: 'running' })).toMatchObject({ status: 'running' });
  });

  it('keeps finished tasks, their logs, results and checkpoints across a restart of Redis (appendonly)', async () => {
    const server = await redisServer();
    const result = { text: 'narration\n\nanswer', finalText: 'answer', finishReason: 'stop', model: 'scripted', toolCalls: 1 };
    {
      await using store = await createRedisTaskStore({ url: server.url });
      for (let index = 0; index < 20; index++) {
        const id = `t${index}`;
        await store.insert(taskRecord(id, { createdAt: new Date(Date.UTC(2026, 0, 1, 0, 0, index)).toISOString() }));
        await store.transition(id, ['pending'], { status: 'running' });
        for (let step = 1; step <= 5; step++) store.appendLog(id, 'step-start', { step });
        await store.saveCheckpoint(id, checkpointOf([userMessage(`${id} asks`)]));
        await store.transition(id, ['running'], { status: 'completed', finishedAt: new Date().toISOString(), result });
      }
    }
    await server.restart();
    await using store = await createRedisTaskStore({ url: server.url });
    const { tasks, total } = await store.list({ status: 'completed' }, { limit: 100 });
    expect(total).toBe(20);
    expect(tasks.map((task) => task.id)).toEqual(Array.from({ length: 20 }, (_, index) => `t${19 - index}`));
    for (const task of tasks) {
      expect(task.result).toEqual(result);
      expect((await store.readLog(task.id)).entries.map((entry) => entry.data)).toEqual([1, 2, 3, 4, 5].map((step) => ({ step })));
      expect((await store.loadCheckpoint(task.id))?.messages).toEqual([userMessage(`${task.id} asks`)]);
    }
  });
});

describe('createRedisTaskStore: opening', () => {
  it('refuses an unreachable Redis after connectTimeoutMs, in one line naming where', async () => {
    const port = await freePort();
    const message = await refused({ url: `redis://127.0.0.1:${port}/3`, connectTimeoutMs: 300 });
    expect(message).toMatch(
      new RegExp(`^The Redis task store at 127\\.0\\.0\\.1:${port}/3 cannot be used: no connection within 300 ms \\(.*ECONNREFUSED.*\\)$`),
    );
  });

  it('works with the password in the URL, and never shows it', async () => {
    const server = await redisServer({ args: ['--requirepass', PASSWORD] });
    const url = `redis://:${PASSWORD}@127.0.0.1:${server.port}/0`;
    const store = await createRedisTaskStore({ url, prefix: 'auth:' });
    expect(store.where).toBe(`127.0.0.1:${server.port}/0`);
    await store.insert(taskRecord('t1'));
    expect((await store.get('t1'))?.id).toBe('t1');

    const shown: string[] = [];
    shown.push(await refused({ url: `redis://:wrong-${PASSWORD}@127.0.0.1:${server.port}/0` }));
    expect(shown[0]).toMatch(/refused the connection: .*WRONGPASS/);
    shown.push(await refused({ url: `redis://127.0.0.1:${server.port}/0` }));
    expect(shown[1]).toMatch(/refused the connection: .*NOAUTH/);
    shown.push((await failureOf(createRedisTaskStore({ url: url.replace('redis:', 'http:') }))).message);
    expect(shown[2]).toMatch(/^Expected the Redis `url` to start with redis:\/\/ or rediss:\/\//);
    await server.stop();
    shown.push((await failureOf(store.get('t1'))).message);
    await store.close();
    shown.push((await failureOf(store.get('t1'))).message);
    expect(shown[4]).toBe(`The Redis task store at 127.0.0.1:${server.port}/0 is closed`);
    for (const message of shown) expect(message).not.toContain(PASSWORD);
  });

  it('refuses a database the server does not have', async () => {
    const server = await redisServer({ args: ['--databases', '2'] });
    expect(await refused({ url: `redis://127.0.0.1:${server.port}/5` })).toMatch(/cannot be used: it refused the connection: .*DB index is out of range/);
  });

  it('warns when Redis may lose or evict what it holds, and not when it is set as Klym needs', async () => {
    const [recommended, volatile, evicting] = await Promise.all([
      redisServer(),
      redisServer({ appendonly: 'no' }),
      redisServer({ maxmemoryPolicy: 'allkeys-lru' }),
    ]);
    expect(await warningsOf(recommended.url)).toEqual([]);
    expect(await warningsOf(volatile.url)).toEqual([
      expect.stringMatching(/^Redis has appendonly no: a restart of Redis loses .*\(Klym needs appendonly yes\)$/),
    ]);
    expect(await warningsOf(evicting.url)).toEqual([
      expect.stringMatching(/^Redis has maxmemory-policy allkeys-lru: .*\(Klym needs maxmemory-policy noeviction\)$/),
    ]);
  });

  it('says when the server does not let it check its settings', async () => {
    const server = await redisServer({ args: ['--user', 'klym', 'on', `>${PASSWORD}`, '~*', '&*', '+@all', '-config'] });
    await using store = await createRedisTaskStore({ url: `redis://klym:${PASSWORD}@127.0.0.1:${server.port}/0` });
    expect(store.warnings).toEqual([
      expect.stringMatching(
        /^could not check Redis's appendonly and maxmemory-policy \(CONFIG GET: NOPERM .*\); Klym needs appendonly yes and maxmemory-policy noeviction$/,
      ),
    ]);
  });

  it('checks its options', async () => {
    await expect(createRedisTaskStore({ url: 'redis://127.0.0.1:1/0', connectTimeoutMs: 0 })).rejects.toMatchObject({
      code: 'CONFIG_INVALID',
      message: 'Expected `connectTimeoutMs` to be a positive integer, got 0',
    });
    await expect(createRedisTaskStore({ url: 'redis://127.0.0.1:1/0', artifacts: { maxBytesPerTask: -1 } })).rejects.toMatchObject({
      code: 'CONFIG_INVALID',
      message: 'Expected `artifacts.maxBytesPerTask` to be a positive integer, got -1',
    });
    await expect(createRedisTaskStore({ url: 'not a url' })).rejects.toMatchObject({
      code: 'CONFIG_INVALID',
      message: expect.stringContaining('got a string that is not a URL'),
    });
    await expect(createRedisTaskStore({ url: 'redis://127.0.0.1:1/zero' })).rejects.toMatchObject({
      code: 'CONFIG_INVALID',
      message: expect.stringContaining('to be a database number, as in redis://host:6379/0, got /zero'),
    });
  });
});
