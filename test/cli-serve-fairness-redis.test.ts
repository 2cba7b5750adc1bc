// Many callers, one Klym scaled out (issue #33): fair turns and quotas per principal across a `klym serve` front
// (`tasks.concurrency: 0`) and two `klym worker`s of one task at a time each, on a real redis-server, over REST.
// The scripted model's self-check calls grynya's `query_graph` once per task: the fake grynya (in this process)
// holds those calls (`hang`) while the test looks at the queue, or answers them after 100 ms.
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { createFakeGrynya, type FakeGrynya } from '@klym/fake-grynya';
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  cancelTask as cancel,
  quotaOf as quota,
  restCall,
  seenTask as seen,
  startKlym,
  startTask as start,
  temporaryDirectory,
  type KlymProcess,
  type SeenTask,
} from './cli-harness.ts';
import { startRedisServer } from './support/redis-server.ts';

const ALICE = 'token-of-alice-0123456789';
const BOB = 'token-of-bob-0123456789ab';

const until = { timeout: 15_000, interval: 50 };

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).toReversed()) await cleanup().catch(() => {});
});

/** A front and two workers on a Redis of their own, and the fake grynya their tasks call. */
interface Fleet {
  readonly grynya: FakeGrynya;
  /** The front's base URL. */
  readonly url: string;
}

/**
 * Starts redis-server, the fake grynya, the front and two workers (one slot each) with `tasks` on top; resolves
 * once both workers see grynya.
 */
async function startFleet(tasks: Record<string, unknown> = {}): Promise<Fleet> {
  const redis = await startRedisServer();
  cleanups.push(() => redis.close());
  const grynya = await createFakeGrynya();
  cleanups.push(() => grynya.close());
  const directory = temporaryDirectory();
  cleanups.push(async () => directory[Symbol.dispose]());
  const config = {
    upstreams: { grynya: { url: grynya.mcpUrl } },
    tasks: { store: redis.url, concurrency: 1, shutdownGraceMs: 0, ...tasks },
    server: { port: 0, tokens: { alice: ALICE, bob: BOB } },
    worker: { port: 0 },
  };
  writeFileSync(path.join(directory.path, 'klym.config.json'), JSON.stringify(config));
  const spawn = (args: readonly string[]): KlymProcess => {
    const klym = startKlym([...args, '--config', 'klym.config.json'], { cwd: directory.path });
    cleanups.push(async () => {
      if (klym.child.exitCode !== null || klym.child.signalCode !== null) return;
      klym.child.kill('SIGKILL');
      await klym.exited();
    });
    return klym;
  };
  const front = spawn(['serve', '--set', 'tasks.concurrency=0']);
  const workers = [spawn(['worker']), spawn(['worker'])];
  const [[, url = ''], ...healths] = await Promise.all([
    front.waitFor(/serving MCP at (http:\/\/[^\s]+)\/mcp/),
    ...workers.map((worker) => worker.waitFor(/health: (http:\/\/\S+)\/healthz/)),
  ]);
  // The self-check calls its probe only once the worker's pool has listed grynya's tools.
  for (const [, health] of healths) {
    const view = async (): Promise<unknown> => (await fetch(`${health}/healthz`)).json();
    await vi.waitFor(async () => expect(await view()).toMatchObject({ role: 'worker', status: 'ok' }), until);
  }
  return { grynya, url };
}

describe('klym serve and two klym workers on Redis, with many callers', () => {
  it("starts a newcomer's task behind another caller's 40-task batch on the first slot either worker frees", async () => {
    const { grynya, url } = await startFleet();
    grynya.faults.hang = true;
    const batch: string[] = [];
    for (let index = 1; index <= 40; index++) batch.push(await start(url, ALICE, `batch ${index}`));
    // Each worker took one of hers and holds it; 38 wait in the shared queue.
    await vi.waitFor(async () => expect((await quota(url, ALICE)).use).toMatchObject({ running: 2, queued: 38 }), until);

    const mine = await start(url, BOB, 'one question');
    // Bob's first task is next, ahead of the 38 of hers that came before it; the front reads that from Redis.
    expect(await seen(url, BOB, mine)).toMatchObject({ status: 'pending', queue_position: 0 });
    expect(await seen(url, ALICE, batch[2] as string)).toMatchObject({ status: 'pending', queue_position: 1 });
    expect(await seen(url, ALICE, batch[39] as string)).toMatchObject({ status: 'pending', queue_position: 38 });
    expect(await quota(url, BOB)).toMatchObject({ use: { running: 0, queued: 1 } });

    // Runs now take 100 ms; alice's two held ones are cancelled, which frees both workers' slots.
    grynya.faults.hang = false;
    grynya.faults.delayMs = 100;
    for (const id of batch.slice(0, 2)) await cancel(url, ALICE, id);
    await vi.waitFor(async () => expect((await seen(url, BOB, mine)).started_at).toBeDefined(), until);
    const bobStarted = (await seen(url, BOB, mine)).started_at as string;
    const hers = await Promise.all(batch.map((id) => seen(url, ALICE, id)));
    const aheadOfBob = hers.filter((task) => task.started_at !== undefined && task.started_at <= bobStarted);
    // In arrival order all 40 of hers would have started first; in fair turns, her two held ones and at most a
    // couple more (the other worker's next task may start in the same moment as bob's).
    expect(aheadOfBob.length).toBeGreaterThanOrEqual(2);
    expect(aheadOfBob.length).toBeLessThanOrEqual(4);
    expect(hers.filter((task) => task.status === 'pending').length).toBeGreaterThanOrEqual(30);
    // Hers in the order she started them.
    const which = aheadOfBob.map((task) => hers.indexOf(task)).toSorted((a, b) => a - b);
    expect(which).toEqual([0, 1, 2, 3].slice(0, aheadOfBob.length));
    await vi.waitFor(async () => expect((await seen(url, BOB, mine)).status).toBe('completed'), until);
  }, 60_000);

  it("holds alice to tasks.perPrincipal across both workers: her 4th waiting start is refused (429), bob's runs beside", async () => {
    const { grynya, url } = await startFleet({ perPrincipal: { maxRunning: 1, maxQueued: 3 } });
    grynya.faults.hang = true;
    const hers: string[] = [];
    for (let index = 1; index <= 4; index++) hers.push(await start(url, ALICE, `hers ${index}`));
    // One of hers runs; the other worker may not take a second (maxRunning 1 holds across workers), so 3 wait.
    await vi.waitFor(async () => expect((await quota(url, ALICE)).use).toMatchObject({ running: 1, queued: 3 }), until);
    expect((await seen(url, ALICE, hers[0] as string)).status).toBe('running');

    const refused = await restCall(url, '/api/tasks', ALICE, { prompt: 'one too many' });
    expect(refused.status).toBe(429);
    // No run has ended yet to tell how long one takes: 30 s.
    expect(refused.headers.get('retry-after')).toBe('30');
    expect(refused.json).toEqual({
      error: {
        code: 'QUOTA_EXCEEDED',
        message: expect.stringMatching(/^Principal alice has 3 tasks waiting, its maxQueued is 3 \(tasks\.perPrincipal\.maxQueued\): /),
      },
    });

    // Bob is not held back: his start is taken, and his task runs at once on the worker alice's cap left free.
    const his = await start(url, BOB, 'his');
    await vi.waitFor(async () => expect((await seen(url, BOB, his)).status).toBe('running'), until);
    const quotas = { max_running: 1, max_queued: 3 };
    expect(await quota(url, ALICE)).toMatchObject({ principal: 'alice', quotas, use: { running: 1, queued: 3 } });
    expect(await quota(url, BOB)).toMatchObject({ principal: 'bob', quotas, use: { running: 1, queued: 0 } });

    // Her tasks then run one after another on two free workers: none starts before the one before it ended.
    grynya.faults.hang = false;
    grynya.faults.delayMs = 100;
    await cancel(url, ALICE, hers[0] as string);
    await cancel(url, BOB, his);
    const all = (): Promise<SeenTask[]> => Promise.all(hers.map((id) => seen(url, ALICE, id)));
    const ends = ['cancelled', 'completed', 'completed', 'completed'];
    await vi.waitFor(async () => expect((await all()).map((task) => task.status)).toEqual(ends), until);
    const runs = (await all()).toSorted((a, b) => String(a.started_at).localeCompare(String(b.started_at)));
    const overlapping = runs.slice(1).filter((run, index) => String(run.started_at) < String(runs[index]?.finished_at));
    expect(overlapping).toEqual([]);
    // In the order she started them.
    expect(runs.map((run) => run.task_id)).toEqual(hers);
  }, 60_000);
});
