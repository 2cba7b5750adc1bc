import { afterAll, describe, expect, it, vi } from 'vitest';
import { startRedisServer, type RedisServer } from '../../../../../test/support/redis-server.ts';
import { createRedisTaskStore } from '../store/redis/redis-task-store.ts';
import { createMemoryTaskStore } from '../store/memory-task-store.ts';
import type { TaskStore } from '../store/task-types.ts';
import { createDailySpend } from './daily-spend.ts';
import { resolvePrincipalLimits } from './principal-quotas.ts';

const NOON = Date.parse('2026-11-28T12:00:00Z');
const DAY = '2026-11-28';

/** A store whose `addSpend` fails while `down`, as a Redis outage makes it. */
function flakyStore(): { store: TaskStore; down: { value: boolean }; writes: { value: number } } {
  const inner = createMemoryTaskStore();
  const down = { value: false };
  const writes = { value: 0 };
  const store: TaskStore = {
    ...inner,
    addSpend: (principal, day, spend) => {
      if (down.value) return Promise.reject(new Error('connect ECONNREFUSED 127.0.0.1:6379'));
      writes.value++;
      return inner.addSpend(principal, day, spend);
    },
  };
  return { store, down, writes };
}

describe('daily spend through a store outage', () => {
  it('keeps what the store could not take, counts it meanwhile, and writes it once the store is back', async () => {
    const { store, down, writes } = flakyStore();
    const spend = createDailySpend(store, resolvePrincipalLimits({ maxTokensPerDay: 1_000 }), () => NOON);

    down.value = true;
    const run = await spend.meter('alice');
    expect(run.add({ tokens: 600, usd: 0 }, () => {})).toBeUndefined();
    expect(run.add({ tokens: 200, usd: 0 }, () => {})).toBeUndefined();
    await run.settled();
    // Not in the store, but counted here: the day's 800 are seen by a start and by another run's meter.
    expect(await store.spendOf('alice', DAY)).toEqual({ tokens: 0, usd: 0 });
    expect((await spend.today('alice')).spent).toEqual({ tokens: 800, usd: 0 });
    const other = await spend.meter('alice');
    expect(other.add({ tokens: 250, usd: 0 }, () => {})).toEqual({ name: 'tokensPerDay', limit: 1_000, used: 1_050 });
    expect(await spend.reached('alice')).toEqual({ name: 'tokensPerDay', limit: 1_000, used: 1_050 });

    // Back: written, once each, and counted once.
    down.value = false;
    await vi.waitFor(async () => expect(await store.spendOf('alice', DAY)).toEqual({ tokens: 1_050, usd: 0 }), { timeout: 10_000 });
    expect(writes.value).toBe(1);
    expect((await spend.today('alice')).spent).toEqual({ tokens: 1_050, usd: 0 });
    expect(await spend.reached('bob')).toBeUndefined();
  });
});

describe('daily spend through a Redis outage', () => {
  const servers: RedisServer[] = [];
  afterAll(async () => {
    await Promise.all(servers.map((server) => server.close()));
  });

  it('counts what was spent while Redis was down, once it is back: the quota holds', async () => {
    const server = await startRedisServer();
    servers.push(server);
    await using store = await createRedisTaskStore({ url: server.url, prefix: 'spend-outage:' });
    const spend = createDailySpend(store, resolvePrincipalLimits({ maxTokensPerDay: 1_000 }), () => NOON);
    const run = await spend.meter('alice');
    run.add({ tokens: 300, usd: 0 }, () => {});
    await run.settled();
    expect(await store.spendOf('alice', DAY)).toEqual({ tokens: 300, usd: 0 });

    await server.stop();
    expect(run.add({ tokens: 500, usd: 0 }, () => {})).toBeUndefined();
    // The day's limit is reached while Redis is still down: this run knows it from its own count.
    expect(run.add({ tokens: 250, usd: 0 }, () => {})).toEqual({ name: 'tokensPerDay', limit: 1_000, used: 1_050 });
    await run.settled();

    await server.restart();
    await vi.waitFor(async () => expect(await store.spendOf('alice', DAY)).toEqual({ tokens: 1_050, usd: 0 }), { timeout: 20_000, interval: 100 });
    // Another process reading the store alone sees the day spent.
    const elsewhere = createDailySpend(store, resolvePrincipalLimits({ maxTokensPerDay: 1_000 }), () => NOON);
    expect(await elsewhere.reached('alice')).toEqual({ name: 'tokensPerDay', limit: 1_000, used: 1_050 });
  }, 40_000);
});
