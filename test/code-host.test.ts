// Issue #41: a program off the run's thread (one that computes for seconds does not hold up another run), its
// sub-calls (`llm`, `llmMap`: counted before they are sent, `mapConcurrency` at a time, in the run's usage) and
// its host calls stopped by a spent budget, the run then ending as budget-stopped.
import { createTaskManager, runAgent, type AgentEvent } from '@klym/core';
import { createScriptedModel } from '@klym/core/internal';
import { afterEach, describe, expect, it } from 'vitest';
import { grynyaPool } from './support/grynya-pool.ts';
import { programmer, type Prompt } from './support/programmer.ts';

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).toReversed()) await cleanup();
});

const isSubCall = (prompt: Prompt): boolean => {
  const system = prompt[0];
  return system?.role === 'system' && system.content.startsWith('You are called from a program');
};
const promptText = (prompt: Prompt): string => {
  const user = prompt.find((message) => message.role === 'user');
  return user === undefined || typeof user.content === 'string' ? '' : user.content.map((part) => (part.type === 'text' ? part.text : '')).join('');
};

/** A model that runs `code`, answers sub-calls with their text upper-cased (after `subCallMs`), then says the tool's result. */
function upperCasingProgrammer(code: string, subCallMs = 0) {
  const inFlight = { now: 0, most: 0, subCalls: 0 };
  const { model } = programmer(code, (prompt) => {
    if (!isSubCall(prompt)) return undefined;
    inFlight.subCalls++;
    inFlight.most = Math.max(inFlight.most, ++inFlight.now);
    return new Promise<string>((resolve) =>
      setTimeout(() => {
        inFlight.now--;
        resolve((/<text>\n([\s\S]*)\n<\/text>/.exec(promptText(prompt))?.[1] ?? '').toUpperCase());
      }, subCallMs),
    );
  });
  return { model, inFlight };
}

describe('klym__run_code off the run thread', () => {
  it('a program computing for seconds does not hold up another run: that run reaches its next model call and ends first', async () => {
    const { pool } = await grynyaPool(cleanups);
    const order: string[] = [];
    const spinning = Promise.withResolvers<void>();
    const { model: spinner } = upperCasingProgrammer(`await log('spinning'); for (;;) {}`);
    const first = runAgent({
      pool,
      prompt: 'spin',
      model: spinner,
      code: { timeoutMs: 4_000 },
      onEvent: (event) => {
        if (event.type === 'code-log') spinning.resolve();
        if (event.type === 'code-end') order.push('spinner: program ended');
      },
    });
    await spinning.promise;
    const other = createScriptedModel({
      steps: ({ call }) => {
        order.push(`other: model call ${call}`);
        return call === 1 ? { toolCalls: [{ toolName: 'grynya__query_graph', args: { query: 'RETURN 1' } }] } : { text: 'done' };
      },
    });
    const second = await runAgent({
      pool,
      prompt: 'query',
      model: other,
      onEvent: (event) => void (event.type === 'run-end' && order.push('other: run ended')),
    });
    expect(second.finalText).toBe('done');
    const spun = await first;
    expect(spun.finalText).toBe('error-text: KlymError: The program ran past its time limit: code.timeoutMs is 4000 ms');
    expect(order).toEqual(['other: model call 1', 'other: model call 2', 'other: run ended', 'spinner: program ended']);
  }, 30_000);
});

describe('llm and llmMap', () => {
  it('answers one sub-call and a map of sub-calls, mapConcurrency at a time, in order, counted in the run usage', async () => {
    const { pool } = await grynyaPool(cleanups);
    const texts = ['alpha', 'beta', 'gamma', 'delta', 'epsilon', 'zeta', 'eta'];
    const code = `const one = await llm('Upper-case it', 'hello'); const many = await llmMap('Upper-case it', ${JSON.stringify(texts)}); return { one, many };`;
    const { model, inFlight } = upperCasingProgrammer(code, 20);
    const events: AgentEvent[] = [];
    const run = await runAgent({ pool, prompt: 'shout', model, mapConcurrency: 3, onEvent: (event) => void events.push(event) });
    expect(run.finalText).toBe(`text: ${JSON.stringify({ one: 'HELLO', many: texts.map((text) => text.toUpperCase()) })}`);
    expect(inFlight.subCalls).toBe(1 + texts.length);
    expect(inFlight.most).toBe(3);
    const calls = events.flatMap((event) => (event.type === 'code-call' ? [event] : []));
    expect(calls.map((call) => call.name)).toEqual(['llm', 'llmMap']);
    const subCallTokens = calls.reduce((sum, call) => sum + (call.usage?.totalTokens ?? 0), 0);
    expect(calls.every((call) => (call.usage?.totalTokens ?? 0) > 0)).toBe(true);
    // The run's usage holds the two model steps and every sub-call.
    const steps = events.flatMap((event) => (event.type === 'step-end' ? [event.usage.totalTokens] : [])).reduce((sum, tokens) => sum + tokens, 0);
    expect(run.usage.totalTokens).toBe(steps + subCallTokens);
  });

  it("counts a task's sub-calls in its principal's day, as the task's own usage does", async () => {
    const { pool } = await grynyaPool(cleanups);
    const { model } = upperCasingProgrammer(`return await llmMap('Upper-case it', ['one', 'two', 'three']);`);
    const manager = createTaskManager({ pool, run: (options) => runAgent({ ...options, model }), perPrincipal: { maxTokensPerDay: 1_000_000 } });
    cleanups.push(() => manager.close({ graceMs: 0 }));
    const alice = { principal: 'alice' };
    const task = await manager.start({ prompt: 'shout' }, alice);
    await expect.poll(async () => (await manager.get(task.id, alice)).status, { timeout: 20_000 }).toBe('completed');
    const done = await manager.get(task.id, alice);
    const logged = (await manager.logs(task.id, alice, { limit: 500 })).entries;
    const subCalls = logged.reduce(
      (sum, entry) => sum + (entry.type === 'code-call' ? ((entry.data as { usage?: { totalTokens: number } }).usage?.totalTokens ?? 0) : 0),
      0,
    );
    expect(subCalls).toBeGreaterThan(0);
    await expect.poll(async () => (await manager.usage(alice)).today.spent.tokens).toBe(done.usage.totalTokens);
  });

  it('refuses a text too big for one sub-call, naming its size and the room, and the program can go on', async () => {
    const { pool } = await grynyaPool(cleanups);
    const code = `try { await llm('Summarise', 'word '.repeat(5000)); return 'sent' } catch (error) { return error.message }`;
    const { model, inFlight } = upperCasingProgrammer(code);
    const run = await runAgent({ pool, prompt: 'summarise', model, mapChunkTokens: 1_000 });
    expect(run.finalText).toMatch(
      /^text: llm\(\): the text is too big for one sub-call: it counts 10,000 tokens \(25,000 characters\), the instruction \d+, [\d,]+ in all, and a sub-call may count 1,000 \(the smaller of mapChunkTokens and half the model's window\)/,
    );
    expect(inFlight.subCalls).toBe(0);
  });

  it('refuses bad arguments by name', async () => {
    const { pool } = await grynyaPool(cleanups);
    const code = `const errors = []; for (const call of [() => llm(42, 'x'), () => llmMap('x', 'not an array')]) { try { await call() } catch (error) { errors.push(error.message) } } return errors;`;
    const { model } = upperCasingProgrammer(code);
    const run = await runAgent({ pool, prompt: 'bad', model });
    expect(run.finalText).toBe(
      `text: ${JSON.stringify(['llm(): the instruction must be a non-empty string, got 42', 'llmMap(): texts must be an array, got string'])}`,
    );
  });
});

describe("a spent budget, or an approval, stops a program's call", () => {
  it('stops sub-calls the token budget cannot pay for, though the program catches errors; the run ends budget:tokens', async () => {
    const { pool } = await grynyaPool(cleanups);
    const code = `let answered = 0, caught = 0; const text = 'lorem '.repeat(2000);
for (let i = 0; i < 100; i++) { try { await llm('Upper-case it', text); answered++ } catch { caught++ } }
return { answered, caught };`;
    const { model, inFlight } = upperCasingProgrammer(code);
    const events: AgentEvent[] = [];
    const run = await runAgent({ pool, prompt: 'spend', model, budget: { maxTokens: 30_000 }, onEvent: (event) => void events.push(event) });
    expect(run.finishReason).toBe('budget:tokens');
    // About 8,000 tokens a call (its text, its upper-cased answer): three fit, not the hundred the program asked for.
    expect(inFlight.subCalls).toBe(3);
    // Each sub-call held its most before it was sent: together they stayed inside the budget (the step's own request is counted as it ends).
    const subCallTokens = events.reduce((sum, event) => sum + (event.type === 'code-call' ? (event.usage?.totalTokens ?? 0) : 0), 0);
    expect(subCallTokens).toBeGreaterThan(20_000);
    expect(subCallTokens).toBeLessThanOrEqual(30_000);
    const end = events.find((event) => event.type === 'code-end');
    expect(end).toMatchObject({ error: expect.stringMatching(/^The budget stopped the program: the run's token budget cannot pay for another call: /) });
    expect(events.find((event) => event.type === 'tool-error')).toMatchObject({ toolName: 'klym__run_code', code: 'BUDGET_EXCEEDED' });
  });

  it("stops tool calls once a budget kept outside the run is spent (a principal's day); the run ends on it", async () => {
    const { grynya, pool } = await grynyaPool(cleanups);
    const day = new AbortController();
    let seen = 0;
    const code = `for (let i = 0; ; i++) { try { await callTool('grynya__query_graph', { query: 'RETURN ' + i }) } catch {} }`;
    const { model } = upperCasingProgrammer(code);
    const events: AgentEvent[] = [];
    const run = await runAgent({
      pool,
      prompt: 'forever',
      model,
      budgetSignal: day.signal,
      onEvent: (event) => {
        events.push(event);
        if (event.type === 'code-call' && ++seen === 5) day.abort({ name: 'tokensPerDay', limit: 1_000, used: 1_200 });
      },
    });
    expect(run.finishReason).toBe('budget:tokensPerDay');
    expect(grynya.stats.calls.query_graph).toBe(5);
    expect(events.find((event) => event.type === 'code-end')).toMatchObject({
      error: "The budget stopped the program: its principal's tokens for the day are spent: 1200 of 1000 (maxTokensPerDay)",
    });
  });

  it("refuses a program's call of a tool that needs the caller's approval, naming why, and sends nothing", async () => {
    const { grynya, pool } = await grynyaPool(cleanups);
    const code = `try { await callTool('grynya__add_node', { node_type: 'Note', node_data: { id: 'x' } }); return 'written' } catch (error) { return error.message }`;
    const { model } = upperCasingProgrammer(code);
    const run = await runAgent({ pool, prompt: 'write', model, approvals: true, tools: { approval: ['grynya__add_node'] } });
    expect(run.finalText).toBe(
      `text: Tool grynya__add_node needs the caller's approval (tools.approval "grynya__add_node"), which only a task's step can wait for: call it directly, not from a program or a run without a caller`,
    );
    expect(grynya.stats.calls.add_node).toBeUndefined();
  });
});
