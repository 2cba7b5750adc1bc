// Scenario 7 (issue #10), part A: the task store alone, in this process: what one task's bookkeeping costs
// in the in-memory store against the SQLite store, side by side, and the longest time any single store call
// holds the event loop (a SQLite write runs on the loop: this is the stall a status read could wait behind).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { PerformanceObserver } from 'node:perf_hooks';
import { createMemoryTaskStore, type AgentCheckpoint, type TaskRecord, type TaskStore } from '@klym/core';
import { createSqliteTaskStore } from '@klym/core/sqlite';
import { figure, ms, ratio, sideBySide, summarize } from './stats.ts';

const usage = { inputTokens: 1_200, outputTokens: 300, totalTokens: 1_500, estimated: false };
const preview = 'x'.repeat(500);

/** A store call's synchronous part: when it began, and how long it held the loop. */
interface CallTime {
  readonly began: number;
  readonly took: number;
}

/** Every store call's synchronous part, timed: for SQLite that is the whole write or read. */
function timed(store: TaskStore, samples: CallTime[]): TaskStore {
  return new Proxy(store, {
    get(target, key, receiver) {
      const value = Reflect.get(target, key, receiver) as unknown;
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        const began = performance.now();
        const result = (value as (...args: unknown[]) => unknown).apply(target, args);
        samples.push({ began, took: performance.now() - began });
        return result;
      };
    },
  });
}

/** What the task manager does to the store for one task of three steps with one tool call each, and three status reads. */
async function oneTask(store: TaskStore, id: string): Promise<void> {
  const task: TaskRecord = {
    id,
    principal: 'grynya',
    request: { prompt: 'Find sessions without a LAST_EVENT', budget: { maxSteps: 25 } },
    status: 'pending',
    createdAt: new Date().toISOString(),
    currentStep: 'starting',
    usage: { steps: 0, inputTokens: 0, outputTokens: 0, totalTokens: 0, costUsd: undefined },
  };
  await store.insert(task);
  store.appendLog(id, 'task-create', { model: 'scripted', recordResult: false });
  await store.transition(id, ['pending'], { status: 'running', startedAt: new Date().toISOString(), currentStep: 'starting' });
  const messages: AgentCheckpoint['messages'][number][] = [{ role: 'user', content: task.request.prompt }];
  for (let step = 1; step <= 3; step++) {
    store.appendLog(id, 'step-start', { step });
    store.appendLog(id, 'llm-request', { step, messages: messages.length, tools: 5 });
    store.appendLog(id, 'tool-call', { step, toolCallId: `c${step}`, toolName: 'grynya__query_graph', args: { query: 'MATCH (n) RETURN count(n)' } });
    const checkpoint = (current?: AgentCheckpoint['current']): AgentCheckpoint => ({
      steps: step - 1,
      messages: [...messages],
      texts: [],
      usage,
      elapsedMs: step * 100,
      toolCalls: step - 1,
      ...(current === undefined ? {} : { current }),
    });
    store.saveCheckpoint(id, checkpoint({ step, text: '', calls: [{ toolCallId: `c${step}`, toolName: 'grynya__query_graph', input: {} }] }));
    store.appendLog(id, 'tool-result', { step, toolCallId: `c${step}`, toolName: 'grynya__query_graph', durationMs: 3, isError: false, preview });
    store.appendLog(id, 'llm-response', { step, finishReason: 'tool-calls', usage, text: '' });
    store.appendLog(id, 'step-end', { step, usage, costUsd: undefined, elapsedMs: step * 100 });
    await store.update(id, { currentStep: `step ${step} done`, usage: { ...task.usage, steps: step } });
    messages.push({ role: 'assistant', content: [{ type: 'tool-call', toolCallId: `c${step}`, toolName: 'grynya__query_graph', input: {} }] });
    messages.push({
      role: 'tool',
      content: [{ type: 'tool-result', toolCallId: `c${step}`, toolName: 'grynya__query_graph', output: { type: 'text', value: preview } }],
    });
    store.saveCheckpoint(id, { ...checkpoint(), steps: step, messages: [...messages] });
    // Grynya looks in: check_task_status reads the record and the newest log lines.
    await store.get(id);
    await store.tailLog(id, 3);
  }
  await store.transition(id, ['running'], {
    status: 'completed',
    currentStep: 'done',
    finishedAt: new Date().toISOString(),
    result: { text: 'The answer.', finalText: 'The answer.', finishReason: 'stop', model: 'scripted', toolCalls: 3 },
  });
}

/** The in-memory store against the SQLite store (a file in a temp directory), per task and per call. */
export async function storeFigures(options: { quick: boolean }): Promise<string[]> {
  const directory = mkdtempSync(path.join(tmpdir(), 'klym-bench-store-'));
  const calls = { memory: [] as CallTime[], sqlite: [] as CallTime[] };
  // A garbage collection that falls inside a call is V8's pause, not the store's: calls are judged without them.
  const collections: { start: number; end: number }[] = [];
  const observer = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) collections.push({ start: entry.startTime, end: entry.startTime + entry.duration });
  });
  observer.observe({ entryTypes: ['gc'] });
  const memory = timed(createMemoryTaskStore(), calls.memory);
  const sqlite = timed(await createSqliteTaskStore({ path: path.join(directory, 'tasks.db') }), calls.sqlite);
  try {
    let next = 0;
    const rounds = options.quick ? 4 : 10;
    const perRound = options.quick ? 100 : 300;
    const { a, b } = await sideBySide(rounds, perRound, { a: () => oneTask(memory, `m${next++}`), b: () => oneTask(sqlite, `s${next++}`) });
    const tasks = rounds * perRound;
    // Eviction of every finished task (their logs and checkpoints too), timed the same way.
    const evictFrom = calls.sqlite.length;
    const evicted = (await sqlite.evict(new Date(Date.now() + 1_000))).length;
    const evictMs = Math.max(...calls.sqlite.slice(evictFrom).map((call) => call.took)); // its first chunk: the rest run after a yield each
    await new Promise((resolve) => setTimeout(resolve, 50)); // the observer's last entries
    const outsideGc = (list: CallTime[]): number[] =>
      list.filter((call) => !collections.some((gc) => gc.start < call.began + call.took && gc.end > call.began)).map((call) => call.took);
    const memoryCalls = summarize(outsideGc(calls.memory));
    const sqliteCalls = summarize(outsideGc(calls.sqlite));
    const over = (list: CallTime[]): number => outsideGc(list).filter((took) => took > 5).length;
    return [
      `| one task's store work (${tasks} tasks each: insert, 2 transitions, 3 updates, 19 log entries, 6 checkpoints, 3 status reads) | p50 | p99 |`,
      '| --- | --- | --- |',
      `| memory | ${ms(a.median)} | ${ms(a.p99)} |`,
      `| sqlite (WAL, synchronous=NORMAL, log batched per tick) | ${ms(b.median)} | ${ms(b.p99)} |`,
      '',
      `sqlite ÷ memory: ${ratio(b.median / a.median)} at p50, ${ratio(b.p99 / a.p99)} at p99.`,
      `One store call holds the event loop (${calls.sqlite.length} calls each; calls during a garbage collection left out): ` +
        `memory p99 ${ms(memoryCalls.p99)}, max ${ms(memoryCalls.max)}; sqlite p99 ${ms(sqliteCalls.p99)}, max ${ms(sqliteCalls.max)}. ` +
        `Calls over 5 ms: memory ${over(calls.memory)}, sqlite ${over(calls.sqlite)}. ` +
        `Evicting ${evicted} finished tasks, in chunks of 20 with a yield between: the first chunk held the loop ${ms(evictMs)}.`,
      figure('store_task_ratio_p99', b.p99 / a.p99),
      figure('store_call_max_ms', sqliteCalls.max),
      figure('store_calls_over_5ms', over(calls.sqlite), 0),
    ];
  } finally {
    observer.disconnect();
    await sqlite.close();
    rmSync(directory, { recursive: true, force: true });
  }
}
