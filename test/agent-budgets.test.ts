import { createSessionPool, isKlymError, runAgent, type AgentEvent, type SessionPool } from '@klym/core';
import { createMockModel, textUntilAborted } from '@klym/core/testing';
import { createFakeGrynya, type FakeGrynya } from '@klym/fake-grynya';
import { afterEach, describe, expect, it, vi } from 'vitest';

const grynyas: FakeGrynya[] = [];
const pools: SessionPool[] = [];
afterEach(async () => {
  await Promise.all(pools.splice(0).map((pool) => pool.close()));
  await Promise.all(grynyas.splice(0).map((grynya) => grynya.close()));
});

async function grynyaPool(): Promise<{ grynya: FakeGrynya; pool: SessionPool }> {
  const grynya = await createFakeGrynya();
  grynyas.push(grynya);
  const pool = await createSessionPool({ upstreams: { grynya: { url: grynya.sseUrl, transport: 'sse' } } });
  pools.push(pool);
  return { grynya, pool };
}

const count = { name: 'grynya__query_graph', args: { query: 'MATCH (n) RETURN count(n)' } };
/** A model that never stops calling tools, each turn reporting the given usage. */
const endless = (usage: { input: number; output: number } | null, turns = 5) =>
  createMockModel(Array.from({ length: turns }, (_, index) => ({ text: `step ${index + 1}`, toolCalls: [count], usage })));

function recorder(): { events: AgentEvent[]; onEvent: (event: AgentEvent) => void } {
  const events: AgentEvent[] = [];
  return { events, onEvent: (event) => events.push(event) };
}

describe('runAgent budgets: each ends the run with its partial text, visible in the result and the events', () => {
  it('steps: stops after maxSteps model calls with budget:steps', async () => {
    const { pool } = await grynyaPool();
    const model = endless({ input: 10, output: 10 });
    const { events, onEvent } = recorder();

    const run = await runAgent({ pool, prompt: 'Loop', model, budget: { maxSteps: 2 }, onEvent });

    expect(run).toMatchObject({ finishReason: 'budget:steps', steps: 2, text: 'step 1\n\nstep 2', budget: { maxSteps: 2 } });
    expect(run.toolCalls).toHaveLength(2);
    expect(model.doStreamCalls).toHaveLength(2);
    expect(events.slice(-2)).toEqual([
      { type: 'budget', name: 'steps', limit: 2, used: 2 },
      expect.objectContaining({ type: 'run-end', finishReason: 'budget:steps', steps: 2 }),
    ]);
  });

  it('steps: 25 by default', async () => {
    const { pool } = await grynyaPool();
    const run = await runAgent({ pool, prompt: 'Hi', model: createMockModel([{ text: 'hello' }]) });
    expect(run.budget).toEqual({ maxSteps: 25 });
  });

  it('tokens: stops once the total reaches maxTokens', async () => {
    const { pool } = await grynyaPool();
    const model = endless({ input: 900, output: 100 });
    const { events, onEvent } = recorder();

    const run = await runAgent({ pool, prompt: 'Loop', model, budget: { maxTokens: 1_500 }, onEvent });

    expect(run).toMatchObject({ finishReason: 'budget:tokens', steps: 2, text: 'step 1\n\nstep 2', usage: { totalTokens: 2_000, estimated: false } });
    expect(events).toContainEqual({ type: 'budget', name: 'tokens', limit: 1_500, used: 2_000 });
  });

  it('tokens: applies to estimated usage when the provider reports none', async () => {
    const { pool } = await grynyaPool();
    const model = endless(null);

    const run = await runAgent({ pool, prompt: 'Loop', model, budget: { maxTokens: 1_000 } });

    expect(run.finishReason).toBe('budget:tokens');
    expect(run.usage.estimated).toBe(true);
    expect(run.usage.totalTokens).toBeGreaterThanOrEqual(1_000);
  });

  it('cost: priced from the table, stops once maxCostUsd is reached; each step-end carries the cost so far', async () => {
    const { pool } = await grynyaPool();
    const model = endless({ input: 1_000_000, output: 0 });
    const { events, onEvent } = recorder();

    const run = await runAgent({
      pool,
      prompt: 'Loop',
      model,
      prices: { 'mock:scripted-steps': { inputPerMillion: 1, outputPerMillion: 4 } },
      // A million input tokens a step is more than the window Klym gives a model it does not know.
      contextWindows: { 'mock:scripted-steps': 100_000_000 },
      budget: { maxCostUsd: 1.5 },
      onEvent,
    });

    expect(run).toMatchObject({ finishReason: 'budget:cost', steps: 2, costUsd: 2 });
    expect(events.filter((event) => event.type === 'step-end').map((event) => event.type === 'step-end' && event.costUsd)).toEqual([1, 2]);
    expect(events).toContainEqual({ type: 'budget', name: 'cost', limit: 1.5, used: 2 });
  });

  it('cost: with no price for the model the cost is unknown and only the token budget applies', async () => {
    const { pool } = await grynyaPool();
    const model = createMockModel([
      { toolCalls: [count], usage: { input: 1_000_000, output: 0 } },
      { text: 'done', usage: { input: 1_000_000, output: 0 } },
    ]);

    const run = await runAgent({ pool, prompt: 'Go', model, contextWindows: { 'mock:scripted-steps': 100_000_000 }, budget: { maxCostUsd: 0.01 } });

    expect(run).toMatchObject({ finishReason: 'stop', costUsd: undefined, text: 'done' });
  });

  it('time: ends a run whose tool hangs with budget:time, cancels the upstream call, keeps the text', async () => {
    const { grynya, pool } = await grynyaPool();
    grynya.faults.hang = true;
    const model = createMockModel([{ text: 'Looking.', toolCalls: [count] }]);
    const { events, onEvent } = recorder();
    const started = performance.now();

    const run = await runAgent({ pool, prompt: 'Count', model, budget: { timeoutMs: 300 }, onEvent });

    expect(run).toMatchObject({ finishReason: 'budget:time', text: 'Looking.', steps: 1 });
    expect(performance.now() - started).toBeLessThan(5_000);
    expect(run.elapsedMs).toBeGreaterThanOrEqual(300);
    expect(events).toContainEqual(expect.objectContaining({ type: 'budget', name: 'time', limit: 300 }));
    await vi.waitFor(() => expect(grynya.stats.cancelled).toBe(1));
  });

  it('time: ends a run whose model is still generating, with the partial text', async () => {
    const { pool } = await grynyaPool();
    const model = createMockModel([textUntilAborted('Half an ans')]);

    // Long enough for the run to reach its model on a loaded machine: the budget counts from the run's start.
    const run = await runAgent({ pool, prompt: 'Think', model, budget: { timeoutMs: 1_000 } });

    expect(run).toMatchObject({ finishReason: 'budget:time', text: 'Half an ans', steps: 1 });
    expect(model.doStreamCalls[0]?.abortSignal?.aborted).toBe(true);
  });

  it('refuses a budget that makes no sense, naming the option and the value', async () => {
    const { pool } = await grynyaPool();
    await expect(runAgent({ pool, prompt: 'x', budget: { maxSteps: -1 } })).rejects.toThrow('Expected `maxSteps` to be a positive integer, got -1');
    await expect(runAgent({ pool, prompt: 'x', budget: { maxCostUsd: Number.NaN } })).rejects.toMatchObject({ code: 'CONFIG_INVALID' });
    // Beyond what a timer can hold (2^31 - 1 ms), Node would fire it at once: the run would end before it began.
    await expect(runAgent({ pool, prompt: 'x', budget: { timeoutMs: 3_000_000_000 } })).rejects.toMatchObject({
      code: 'CONFIG_INVALID',
      message: expect.stringContaining('`timeoutMs`'),
    });
  });
});

describe('runAgent when the model fails', () => {
  it('rejects with MODEL_ERROR naming the model, after a run-end event that keeps the usage so far', async () => {
    const { pool } = await grynyaPool();
    const model = createMockModel([
      { text: 'First.', toolCalls: [count], usage: { input: 50, output: 5 } },
      () => {
        throw new Error('the model is overloaded');
      },
    ]);
    const { events, onEvent } = recorder();

    const failure = await runAgent({ pool, prompt: 'Go', model, maxRetries: 0, onEvent }).catch((error: unknown) => error);

    expect(isKlymError(failure, 'MODEL_ERROR')).toBe(true);
    expect((failure as Error).message).toBe('Model mock:scripted-steps failed: the model is overloaded');
    expect(events.at(-1)).toEqual({
      type: 'run-end',
      finishReason: 'error',
      steps: 2,
      usage: { inputTokens: 50, outputTokens: 5, totalTokens: 55, estimated: false },
      costUsd: undefined,
      elapsedMs: expect.any(Number),
      error: { code: 'MODEL_ERROR', message: 'Model mock:scripted-steps failed: the model is overloaded' },
    });
  });

  it('a listener that throws does not stop the run', async () => {
    const { pool } = await grynyaPool();
    const run = await runAgent({
      pool,
      prompt: 'Hi',
      model: createMockModel([{ text: 'still here' }]),
      onEvent: () => {
        throw new Error('listener bug');
      },
    });
    expect(run.text).toBe('still here');
  });

  it('an async listener that rejects does not stop the run, nor leave an unhandled rejection behind', async () => {
    const { pool } = await grynyaPool();
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown): void => void unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      const run = await runAgent({
        pool,
        prompt: 'Hi',
        model: createMockModel([{ text: 'still here' }]),
        onEvent: async () => {
          await Promise.resolve();
          throw new Error('async listener bug');
        },
      });
      expect(run.text).toBe('still here');
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });
});
