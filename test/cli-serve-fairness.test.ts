// Many callers, one `klym serve` (issue #33): fair turns between principals, and quotas per principal, on a
// real process over REST, with the scripted model whose self-check calls grynya's `query_graph` once per task:
// the fake grynya holds those calls (`hang`) while the test looks at the queue, or answers them after 100 ms.
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { createFakeGrynya, type FakeGrynya } from '@klym/fake-grynya';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { cancelTask as cancel, quotaOf as quota, restCall, seenTask as seen, serveKlym, startTask as start, temporaryDirectory } from './cli-harness.ts';

const ALICE = 'token-of-alice-0123456789';
const BOB = 'token-of-bob-0123456789ab';

const cleanups: (() => Promise<unknown>)[] = [];
let grynya: FakeGrynya;
beforeEach(async () => {
  grynya = await createFakeGrynya();
  cleanups.push(() => grynya.close());
});
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).toReversed()) await cleanup().catch(() => {});
});

/** Serves Klym with two slots, alice's and bob's tokens, and `tasks` on top; resolves once grynya is connected. */
async function serve(tasks: Record<string, unknown> = {}): Promise<string> {
  const directory = temporaryDirectory();
  cleanups.push(async () => directory[Symbol.dispose]());
  const config = {
    upstreams: { grynya: { url: grynya.mcpUrl } },
    tasks: { store: 'memory', runner: 'inline', concurrency: 2, shutdownGraceMs: 0, ...tasks },
    server: { port: 0, tokens: { alice: ALICE, bob: BOB } },
  };
  writeFileSync(path.join(directory.path, 'klym.config.json'), JSON.stringify(config));
  const { url } = await serveKlym(directory.path, cleanups);
  // The self-check needs grynya's tools listed to call its probe.
  await vi.waitFor(async () => expect((await restCall(url, '/healthz', ALICE)).json.status).toBe('ok'), { timeout: 10_000 });
  return url;
}

describe('klym serve with many callers', () => {
  it("starts a newcomer's task behind a 40-task batch of another caller within a turn, and says where each waits", async () => {
    const url = await serve();
    grynya.faults.hang = true;
    const batch: string[] = [];
    for (let index = 1; index <= 40; index++) batch.push(await start(url, ALICE, `batch ${index}`));
    await vi.waitFor(async () => expect((await quota(url, ALICE)).use).toMatchObject({ running: 2, queued: 38 }), { timeout: 10_000 });

    const mine = await start(url, BOB, 'one question');
    // Only alice's first two run: bob's task is next, ahead of the 38 of hers that came first.
    expect(await seen(url, BOB, mine)).toMatchObject({ status: 'pending', queue_position: 0 });
    expect(await seen(url, ALICE, batch[39] as string)).toMatchObject({ status: 'pending', queue_position: 38 });
    // Each caller sees its own use, and no quota of its own.
    expect(await quota(url, BOB)).toMatchObject({ principal: 'bob', quotas: {}, use: { running: 0, queued: 1 } });
    expect(await quota(url, ALICE)).toMatchObject({ principal: 'alice', quotas: {}, use: { running: 2, queued: 38 } });

    // Runs now take 100 ms; alice's two held ones are cancelled, which frees both slots at once.
    grynya.faults.hang = false;
    grynya.faults.delayMs = 100;
    for (const id of batch.slice(0, 2)) await cancel(url, ALICE, id);
    await vi.waitFor(async () => expect((await seen(url, BOB, mine)).started_at).toBeDefined(), { timeout: 10_000 });
    const bobStarted = (await seen(url, BOB, mine)).started_at as string;
    const hers = await Promise.all(batch.map((id) => seen(url, ALICE, id)));
    const aheadOfBob = hers.filter((task) => task.started_at !== undefined && task.started_at <= bobStarted);
    // In arrival order all 40 of hers would have started first; in fair turns, her two held ones and at most a couple more.
    expect(aheadOfBob.length).toBeGreaterThanOrEqual(2);
    expect(aheadOfBob.length).toBeLessThanOrEqual(4);
    expect(hers.filter((task) => task.status === 'pending').length).toBeGreaterThanOrEqual(30);
    await vi.waitFor(async () => expect((await seen(url, BOB, mine)).status).toBe('completed'), { timeout: 10_000 });
  }, 60_000);

  it("holds each caller to tasks.perPrincipal: alice's 6th waiting start is refused (429), one of hers runs at a time, bob's beside it", async () => {
    const url = await serve({ perPrincipal: { maxRunning: 1, maxQueued: 5 } });
    grynya.faults.hang = true;
    const hers: string[] = [];
    for (let index = 1; index <= 6; index++) hers.push(await start(url, ALICE, `hers ${index}`));
    await vi.waitFor(async () => expect((await quota(url, ALICE)).use).toMatchObject({ running: 1, queued: 5 }), { timeout: 10_000 });

    const refused = await restCall(url, '/api/tasks', ALICE, { prompt: 'one too many' });
    expect(refused.status).toBe(429);
    // No run has ended yet to tell how long one takes: 30 s.
    expect(refused.headers.get('retry-after')).toBe('30');
    expect(refused.json).toEqual({
      error: {
        code: 'QUOTA_EXCEEDED',
        message: expect.stringMatching(/^Principal alice has 5 tasks waiting, its maxQueued is 5 \(tasks\.perPrincipal\.maxQueued\): /),
      },
    });

    // A slot is free (alice is at her maxRunning of 1): bob's task takes it at once.
    const his = await start(url, BOB, 'his');
    await vi.waitFor(async () => expect((await seen(url, BOB, his)).status).toBe('running'), { timeout: 10_000 });
    expect(await quota(url, ALICE)).toMatchObject({ principal: 'alice', quotas: { max_running: 1, max_queued: 5 }, use: { running: 1, queued: 5 } });
    expect(await quota(url, BOB)).toMatchObject({ principal: 'bob', quotas: { max_running: 1, max_queued: 5 }, use: { running: 1, queued: 0 } });

    // Alice's tasks run one after another: none starts before the one before it ended.
    // Cancelled while grynya still holds their calls, so neither can have ended first.
    await cancel(url, ALICE, hers[0] as string);
    await cancel(url, BOB, his);
    grynya.faults.hang = false;
    grynya.faults.delayMs = 100;
    const statuses = async (): Promise<string[]> => (await Promise.all(hers.map((id) => seen(url, ALICE, id)))).map((task) => task.status);
    await vi.waitFor(async () => expect(await statuses()).toEqual(['cancelled', ...Array(5).fill('completed')]), { timeout: 15_000 });
    const runs = (await Promise.all(hers.map((id) => seen(url, ALICE, id)))).toSorted((a, b) => String(a.started_at).localeCompare(String(b.started_at)));
    const overlapping = runs.slice(1).filter((run, index) => (run.started_at as string) < (runs[index]?.finished_at as string));
    expect(overlapping).toEqual([]);
  }, 60_000);

  it('holds maxTokensPerDay on the runner thread: the run that passes it stops, alice is refused until midnight UTC, across a restart; bob starts', async () => {
    const directory = temporaryDirectory();
    cleanups.push(async () => directory[Symbol.dispose]());
    const config = {
      upstreams: { grynya: { url: grynya.mcpUrl } },
      // The scripted model reports no usage: each step is estimated, far more than 1 token.
      tasks: { store: 'sqlite:tasks.db', runner: 'thread', concurrency: 2, shutdownGraceMs: 0, perPrincipal: { maxTokensPerDay: 1 } },
      server: { port: 0, tokens: { alice: ALICE, bob: BOB } },
    };
    writeFileSync(path.join(directory.path, 'klym.config.json'), JSON.stringify(config));
    const first = await serveKlym(directory.path, cleanups);
    await vi.waitFor(async () => expect((await restCall(first.url, '/healthz', ALICE)).json.status).toBe('ok'), { timeout: 10_000 });
    const hers = await start(first.url, ALICE, 'check the graph');
    await vi.waitFor(async () => expect((await seen(first.url, ALICE, hers)).status).toBe('completed'), { timeout: 15_000 });
    // The self-check's first step (its graph probe) passed the day's 1 token: it stopped there, before its answer.
    expect((await restCall(first.url, `/api/tasks/${hers}`, ALICE)).json).toMatchObject({ finish_reason: 'budget:tokensPerDay', budget: { steps: 1 } });
    const spent = (await quota(first.url, ALICE)) as { use: { tokens_today: number }; quotas: unknown; day_resets_at: string };
    expect(spent.quotas).toEqual({ max_tokens_per_day: 1 });
    expect(spent.use.tokens_today).toBeGreaterThan(1);
    const midnight = Date.parse(`${new Date().toISOString().slice(0, 10)}T00:00:00Z`) + 86_400_000;
    expect(spent.day_resets_at).toBe(new Date(midnight).toISOString());

    const refusedNow = async (url: string): Promise<void> => {
      const refused = await restCall(url, '/api/tasks', ALICE, { prompt: 'more' });
      expect(refused.status).toBe(429);
      // Seconds until midnight UTC, rounded up.
      const retryAfter = Number(refused.headers.get('retry-after'));
      expect(Math.abs(retryAfter - Math.ceil((midnight - Date.now()) / 1_000))).toBeLessThanOrEqual(2);
      expect(refused.json).toEqual({
        error: {
          code: 'QUOTA_EXCEEDED',
          message: expect.stringContaining(`Principal alice has spent ${spent.use.tokens_today} tokens today, its maxTokensPerDay is 1`),
        },
      });
    };
    await refusedNow(first.url);
    const his = await start(first.url, BOB, 'his');
    await vi.waitFor(async () => expect((await seen(first.url, BOB, his)).status).toBe('completed'), { timeout: 15_000 });

    // Stopped and started again on the same file: the day's spend is still counted.
    first.klym.child.kill('SIGTERM');
    expect((await first.klym.exited()).code).toBe(0);
    const second = await serveKlym(directory.path, cleanups);
    await refusedNow(second.url);
    expect(((await quota(second.url, ALICE)) as { use: { tokens_today: number } }).use.tokens_today).toBe(spent.use.tokens_today);
  }, 60_000);
});
