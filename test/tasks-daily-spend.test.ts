// Spend per principal and day (issue #33, `tasks.perPrincipal.maxTokensPerDay` / `maxUsdPerDay`): counted in
// the task store as each step and map ends, so it holds across a restart; a run that passes it stops after
// that step as a spent budget stops it; a start is refused until the day (UTC) turns, on an injected clock.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import {
  createSessionPool,
  createTaskManager,
  isKlymError,
  runAgent,
  type AgentRunner,
  type SessionPool,
  type TaskManager,
  type TaskManagerOptions,
  type TaskStore,
} from '@klym/core';
import { createSqliteTaskStore } from '@klym/core/sqlite';
import { createMockModel } from '@klym/core/testing';
import { createFakeGrynya, type FakeGrynya } from '@klym/fake-grynya';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';

const ALICE = { principal: 'alice' };
const BOB = { principal: 'bob' };
/** 10:00 UTC on 27 November 2026: the day turns 14 hours later. */
const MORNING = Date.parse('2026-11-27T10:00:00Z');
const MIDNIGHT = Date.parse('2026-11-28T00:00:00Z');

let grynya: FakeGrynya;
let pool: SessionPool;
let directory: string;
beforeAll(async () => {
  grynya = await createFakeGrynya();
  pool = await createSessionPool({ upstreams: { grynya: { url: grynya.sseUrl, transport: 'sse' } } });
  directory = mkdtempSync(path.join(tmpdir(), 'klym-spend-'));
});
afterAll(async () => {
  await pool.close();
  await grynya.close();
  rmSync(directory, { recursive: true, force: true });
});
const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).toReversed()) await cleanup();
});

const count = { name: 'grynya__query_graph', args: { query: 'MATCH (n) RETURN count(n)' } };
/** Each run: a model that calls a tool at every step, each step 900 tokens in and 100 out, for up to 8 steps. */
const thousandPerStep: AgentRunner = (options) =>
  runAgent({
    ...options,
    model: createMockModel(Array.from({ length: 8 }, (_, index) => ({ text: `step ${index + 1}`, toolCalls: [count], usage: { input: 900, output: 100 } }))),
  });

/** A manager on the SQLite file `name` (opened again by a later call: a restart), with `clock` as its day's clock. */
async function manager(name: string, clock: { now: number }, options: Partial<TaskManagerOptions> = {}): Promise<{ tasks: TaskManager; store: TaskStore }> {
  const store = await createSqliteTaskStore({ path: path.join(directory, `${name}.db`) });
  const tasks = createTaskManager({
    pool,
    store,
    run: thousandPerStep,
    maxConcurrent: 2,
    now: () => clock.now,
    perPrincipal: { maxTokensPerDay: 2_500 },
    ...options,
  });
  const close = async (): Promise<void> => {
    await tasks.close();
    await store.close();
  };
  cleanups.push(close);
  return { tasks, store };
}

const ended = async (tasks: TaskManager, id: string, caller = ALICE) =>
  vi.waitFor(
    async () => {
      const task = await tasks.get(id, caller);
      if (task.status === 'pending' || task.status === 'running') throw new Error(`task ${id} is still ${task.status}`);
      return task;
    },
    { timeout: 20_000, interval: 20 },
  );

const refusal = async (start: Promise<unknown>) => {
  const error = await start.then(
    () => undefined,
    (failure: unknown) => failure,
  );
  if (!isKlymError(error)) throw new Error(`Expected the start to be refused, got ${String(error)}`);
  return error;
};

describe("a principal's spend per day", () => {
  it('stops the run that passes maxTokensPerDay after its step, refuses the next start until the day turns, across a restart', async () => {
    const clock = { now: MORNING };
    const first = await manager('restart', clock);
    const run = await first.tasks.start({ prompt: 'Count the graph, again and again' }, ALICE);
    const stopped = await ended(first.tasks, run.id);
    // Steps of 1,000 tokens: the third passes 2,500, and the run stops there as a spent budget stops it.
    expect(stopped).toMatchObject({
      status: 'completed',
      usage: { steps: 3, totalTokens: 3_000 },
      result: {
        finishReason: 'budget:tokensPerDay',
        finalText: "Stopped by its principal's tokens for the day (maxTokensPerDay) before the work was done: this answer is partial.\n\nstep 3",
      },
    });
    const log = await first.tasks.logs(run.id, ALICE);
    expect(log.entries.find((entry) => entry.type === 'budget')?.data).toEqual({ name: 'tokensPerDay', limit: 2_500, used: 3_000 });

    const refused = await refusal(first.tasks.start({ prompt: 'One more' }, ALICE));
    expect(refused).toMatchObject({ code: 'QUOTA_EXCEEDED', quota: 'maxTokensPerDay', limit: 2_500, used: 3_000, retryAfterMs: MIDNIGHT - MORNING });
    expect(refused.message).toContain('alice has spent 3000 tokens today, its maxTokensPerDay is 2500 (tasks.perPrincipal.maxTokensPerDay)');
    expect(refused.message).toContain('starts again at 2026-11-28T00:00:00.000Z');
    // Another caller is not held back.
    const bobs = await first.tasks.start({ prompt: 'Mine' }, BOB);
    expect(await ended(first.tasks, bobs.id, BOB)).toMatchObject({ status: 'completed', result: { finishReason: 'budget:tokensPerDay' } });
    expect(await first.tasks.usage(ALICE)).toMatchObject({ today: { spent: { tokens: 3_000, usd: 0 }, resetsAt: '2026-11-28T00:00:00.000Z' } });

    // A restart on the same file: the day's spend is still there.
    await cleanups.pop()?.();
    clock.now = MIDNIGHT - 1;
    const second = await manager('restart', clock);
    expect(await refusal(second.tasks.start({ prompt: 'After the restart' }, ALICE))).toMatchObject({ code: 'QUOTA_EXCEEDED', used: 3_000, retryAfterMs: 1 });

    // The day turns: alice starts again from zero.
    clock.now = MIDNIGHT;
    expect(await second.tasks.usage(ALICE)).toMatchObject({ today: { spent: { tokens: 0 } } });
    const next = await second.tasks.start({ prompt: 'A new day' }, ALICE);
    expect(await ended(second.tasks, next.id)).toMatchObject({ status: 'completed', usage: { totalTokens: 3_000 } });
    expect(await second.store.spendOf('alice', '2026-11-27')).toEqual({ tokens: 3_000, usd: 0 });
    expect(await second.store.spendOf('alice', '2026-11-28')).toEqual({ tokens: 3_000, usd: 0 });
  });

  it("ends a waiting task unstarted once its principal's day is spent, and stops runs side by side within a step each", async () => {
    const clock = { now: MORNING };
    // One slot: the second task waits while the first spends the day.
    const { tasks, store } = await manager('waiting', clock, { maxConcurrent: 1 });
    const first = await tasks.start({ prompt: 'Spend the day' }, ALICE);
    const waiting = await tasks.start({ prompt: 'Wait for my turn' }, ALICE);
    expect(await ended(tasks, first.id)).toMatchObject({ result: { finishReason: 'budget:tokensPerDay' } });
    const unstarted = await ended(tasks, waiting.id);
    expect(unstarted).toMatchObject({ status: 'error', usage: { steps: 0 }, error: { code: 'QUOTA_EXCEEDED' } });
    expect(unstarted.error?.message).toContain(`task ${waiting.id} was not started`);

    // Two runs at once share one day: each stops once the day's total passes 2,500, each at most a step past it
    // (no step starts once the store has said so: the step that passes it, and the one the other run has under way).
    const side = await manager('side-by-side', clock);
    const [a, b] = await Promise.all([side.tasks.start({ prompt: 'a' }, ALICE), side.tasks.start({ prompt: 'b' }, ALICE)]);
    const runs = await Promise.all([ended(side.tasks, a.id), ended(side.tasks, b.id)]);
    expect(runs.map((task) => task.result?.finishReason)).toEqual(['budget:tokensPerDay', 'budget:tokensPerDay']);
    const spent = await side.store.spendOf('alice', '2026-11-27');
    expect(spent.tokens).toBe(runs.reduce((sum, task) => sum + task.usage.totalTokens, 0));
    expect(spent.tokens).toBeGreaterThanOrEqual(2_500);
    expect(spent.tokens).toBeLessThanOrEqual(2_500 + 2 * 1_000);
    expect(await store.spendOf('alice', '2026-11-27')).toEqual({ tokens: 3_000, usd: 0 });
  });

  it('holds maxUsdPerDay on priced runs, and a principal override over the default', async () => {
    const clock = { now: MORNING };
    // $1 per million input and $5 per million output: a step of 900 in and 100 out costs $0.0014.
    const prices = { 'scripted-steps': { inputPerMillion: 1, outputPerMillion: 5 } };
    const { tasks } = await manager('usd', clock, { defaults: { prices }, perPrincipal: { maxUsdPerDay: 0.003, overrides: { bob: { maxUsdPerDay: 0.005 } } } });
    const alices = await ended(tasks, (await tasks.start({ prompt: 'a' }, ALICE)).id);
    // $0.0014, $0.0028, $0.0042: the third step passes $0.003.
    expect(alices).toMatchObject({ usage: { steps: 3 }, result: { finishReason: 'budget:usdPerDay' } });
    const bobs = await ended(tasks, (await tasks.start({ prompt: 'b' }, BOB)).id, BOB);
    expect(bobs).toMatchObject({ usage: { steps: 4 }, result: { finishReason: 'budget:usdPerDay' } });
    const refused = await refusal(tasks.start({ prompt: 'b again' }, BOB));
    expect(refused).toMatchObject({ code: 'QUOTA_EXCEEDED', quota: 'maxUsdPerDay', limit: 0.005 });
    expect(refused.message).toContain('$0.0056 today, its maxUsdPerDay is 0.005 (tasks.perPrincipal.overrides.bob.maxUsdPerDay)');
  });
});
