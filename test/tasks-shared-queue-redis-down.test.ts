// A shared task queue when its Redis is away: at creation, and while fronts and workers are up.
import { createMemoryTaskStore, isKlymError } from '@klym/core';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createBullmqTaskQueue } from '../packages/core/src/tasks/queue/index.ts';
import { startRedisServer, type RedisServer } from './support/redis-server.ts';
import { ended, me, openRig, type SharedQueueRig } from './support/shared-queue.ts';
import { freePort } from './support/upstream-servers.ts';

const PASSWORD = 'correct-horse-battery-staple';
const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).toReversed()) await cleanup();
});

describe('a task queue whose Redis goes away', () => {
  it('answers a start with STORE_UNAVAILABLE at once, without the password, and starts tasks again once Redis is back', async () => {
    const redis: RedisServer = await startRedisServer({ args: ['--requirepass', PASSWORD] });
    cleanups.push(() => redis.close());
    const store = createMemoryTaskStore();
    const rig: SharedQueueRig = await openRig(redis, async () => store, `redis://:${PASSWORD}@127.0.0.1:${redis.port}/0`);
    cleanups.push(() => rig.close());
    const front = await rig.front();
    const worker = await rig.worker();
    const before = await front.tasks.start({ prompt: 'quick before' }, me);
    expect((await ended(front.tasks, before.id)).status).toBe('completed');

    await redis.stop();
    const refused: unknown = await front.tasks.start({ prompt: 'quick during' }, me).catch((error: unknown) => error);
    expect(refused).toMatchObject({ code: 'STORE_UNAVAILABLE', message: expect.stringContaining(`Redis at 127.0.0.1:${redis.port}/0 is unreachable`) });
    expect(String((refused as Error).message)).not.toContain(PASSWORD);
    // Reads go on: the store is not on this Redis.
    expect((await front.tasks.get(before.id, me)).status).toBe('completed');

    await redis.restart();
    const after = await vi.waitFor(() => front.tasks.start({ prompt: 'quick after' }, me), { timeout: 10_000, interval: 100 });
    expect((await ended(front.tasks, after.id)).status).toBe('completed');
    const lines = [...front.lines, ...worker.lines].join('\n');
    expect(lines).toMatch(new RegExp(`lost Redis at 127\\.0\\.0\\.1:${redis.port}/0 \\(.+\\); it reconnects by itself`));
    expect(lines).toMatch(/reached Redis at .+ again/);
    expect(lines).not.toContain(PASSWORD);
  });

  it('closes a worker at once while Redis is down, leaving its task running for a worker to resume once Redis is back', async () => {
    const redis: RedisServer = await startRedisServer();
    cleanups.push(() => redis.close());
    const store = createMemoryTaskStore();
    const rig: SharedQueueRig = await openRig(redis, async () => store);
    cleanups.push(() => rig.close());
    const quick = { lockDurationMs: 1_000, stalledIntervalMs: 500, commandTimeoutMs: 500 };
    const front = await rig.front();
    const first = await rig.worker({ queue: quick });
    rig.grynya.faults.hang = true;
    const task = await front.tasks.start({ prompt: 'tool under way' }, me);
    await expect.poll(() => rig.grynya.stats.calls.query_graph ?? 0, { timeout: 10_000 }).toBe(1);

    await redis.stop();
    await first.tasks.close({ graceMs: 0 });
    // Not cancelled: handed on, as far as Redis could be told.
    expect(await front.tasks.get(task.id, me)).toMatchObject({ status: 'running' });

    await redis.restart();
    const second = await rig.worker({ queue: quick });
    const done = await ended(front.tasks, task.id);
    expect(done).toMatchObject({ status: 'completed', resumes: [0], result: { finalText: 'The query was interrupted; I did not run it again.' } });
    expect(rig.tracker.runs.get(task.id)).toEqual([first.name, second.name]);
    expect(rig.grynya.stats.calls.query_graph).toBe(1);
  });

  it('stops a run cancelled while its worker was away from Redis, once the worker is back', async () => {
    const redis: RedisServer = await startRedisServer();
    cleanups.push(() => redis.close());
    const store = createMemoryTaskStore();
    const rig: SharedQueueRig = await openRig(redis, async () => store);
    cleanups.push(() => rig.close());
    const front = await rig.front();
    const worker = await rig.worker();
    rig.grynya.faults.hang = true;
    const task = await front.tasks.start({ prompt: 'tool under way' }, me);
    await expect.poll(() => rig.grynya.stats.calls.query_graph ?? 0, { timeout: 10_000 }).toBe(1);

    await redis.stop();
    // The store is not on this Redis: the cancel is kept, but the cancel channel cannot carry it.
    expect(await front.tasks.cancel(task.id, me)).toMatchObject({ cancelled: true });
    expect(front.lines.join('\n')).toMatch(/could not tell the workers that task .+ was cancelled/);
    expect(rig.grynya.stats.cancelled).toBe(0);
    await redis.restart();
    await expect.poll(() => rig.grynya.stats.cancelled, { timeout: 10_000 }).toBe(1);
    expect(await worker.tasks.get(task.id, me)).toMatchObject({ status: 'cancelled' });
  });

  it('refuses to open when Redis cannot be reached, naming host:port/db and never the password', async () => {
    const port = await freePort();
    const opening = createBullmqTaskQueue({ url: `redis://klym:${PASSWORD}@127.0.0.1:${port}/3`, connectTimeoutMs: 300 });
    const error: unknown = await opening.catch((caught: unknown) => caught);
    expect(isKlymError(error, 'STORE_UNAVAILABLE')).toBe(true);
    expect((error as Error).message).toMatch(new RegExp(`could not reach Redis at 127\\.0\\.0\\.1:${port}/3 within 300 ms \\(.*ECONNREFUSED`));
    expect((error as Error).message).not.toContain(PASSWORD);
  });

  it('refuses a URL that is not Redis, or options it cannot use, without quoting the URL', async () => {
    await expect(createBullmqTaskQueue({ url: `http://user:${PASSWORD}@example.com` })).rejects.toMatchObject({
      code: 'CONFIG_INVALID',
      message: 'Expected the Redis `url` to start with redis:// or rediss://, got http://…',
    });
    await expect(createBullmqTaskQueue({ url: 'redis://127.0.0.1:6379/zero' })).rejects.toMatchObject({
      code: 'CONFIG_INVALID',
      message: expect.stringContaining('database number'),
    });
    await expect(createBullmqTaskQueue({ url: 'redis://127.0.0.1:6379/0', stalledIntervalMs: 0 })).rejects.toMatchObject({
      code: 'CONFIG_INVALID',
      message: 'Expected `stalledIntervalMs` to be a positive number, got 0',
    });
  });
});
