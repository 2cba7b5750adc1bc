import { afterEach, describe, expect, it, vi } from 'vitest';
import type { AgentRunResult, RunAgentOptions } from '../agent/types.ts';
import { KlymError } from '../errors.ts';
import type { SessionPool } from '../pool/session-pool.ts';
import { runResult } from '../testing/run-result.ts';
import { createMemoryTaskStore } from './store/memory-task-store.ts';
import type { TaskQueue } from './queue/task-queue.ts';
import { createTaskManager } from './task-manager.ts';
import type { AgentRunner, TaskManager } from './task-manager-types.ts';
import type { TaskStore } from './store/task-types.ts';

const pool = { upstreams: [], openScope: () => ({ close: async () => {} }) } as unknown as SessionPool;
const me = { principal: 'grynya' };
const usage = { inputTokens: 10, outputTokens: 5, totalTokens: 15, estimated: false };
const result = (text: string, finishReason = 'stop'): AgentRunResult => runResult(text, { finishReason, usage });

/** A runner that waits until released or aborted, like runAgent: resolves `cancelled` on abort. */
function gatedRunner(): { run: AgentRunner; release: (text?: string) => void; calls: RunAgentOptions[] } {
  const waiting: ((text: string) => void)[] = [];
  const calls: RunAgentOptions[] = [];
  const run: AgentRunner = (options) => {
    calls.push(options);
    options.onEvent?.({ type: 'step-start', step: 1 });
    return new Promise((resolve) => {
      waiting.push((text) => resolve(result(text)));
      options.signal?.addEventListener('abort', () => resolve(result('partial', 'cancelled')), { once: true });
    });
  };
  return { run, calls, release: (text = 'done') => waiting.shift()?.(text) };
}

/** Never settles and ignores its signal. */
const hangs: AgentRunner = () => new Promise(() => {});

/** Throws instead of returning a promise. */
const throwsAtOnce: AgentRunner = () => {
  throw new Error('boom');
};

/** Logs and fails with a key in both. */
const leaksSecret: AgentRunner = (options) => {
  options.onEvent?.({ type: 'upstream-log', entry: { upstream: 'x', source: 'stderr', level: 'info', message: 'key=sk-secret-123' } });
  return Promise.reject(new Error('provider refused sk-secret-123'));
};

/** A shared queue that takes tasks and runs none: only the manager's configuration is checked with it (test/tasks-shared-queue.test.ts runs the real one). */
const shared = (): TaskQueue => ({
  shared: true,
  open: () => {},
  add: async () => {},
  position: async () => undefined,
  cancel: async () => {},
  waiting: async () => 0,
  hasFreeSlot: () => false,
  announce: () => {},
  close: async () => {},
});

let manager: TaskManager | undefined;
afterEach(async () => {
  await manager?.close({ graceMs: 0 });
  manager = undefined;
});

describe('createTaskManager', () => {
  it('starts a task at once and completes it with the run result', async () => {
    const runner = gatedRunner();
    manager = createTaskManager({ pool, run: runner.run });
    const task = await manager.start({ prompt: 'hello' }, me);
    expect(task.id).toMatch(/^[A-Za-z0-9_-]{22}$/);
    await vi.waitFor(() => expect(runner.calls).toHaveLength(1));
    expect((await manager.get(task.id, me)).status).toBe('running');
    runner.release('all good');
    await vi.waitFor(async () => expect((await manager!.get(task.id, me)).status).toBe('completed'));
    const done = await manager.get(task.id, me);
    expect(done.result).toMatchObject({ text: 'all good', finishReason: 'stop' });
    expect(done.usage).toMatchObject({ steps: 1, totalTokens: 15 });
    const log = await manager.logs(task.id, me);
    expect(log.entries.map((entry) => entry.type)).toEqual(['task-create', 'task-start', 'step-start', 'task-end']);
  });

  it('hides a task from every other principal', async () => {
    manager = createTaskManager({ pool, run: gatedRunner().run });
    const task = await manager.start({ prompt: 'mine' }, me);
    const other = { principal: 'mallory' };
    await expect(manager.get(task.id, other)).rejects.toMatchObject({ code: 'TASK_NOT_FOUND' });
    await expect(manager.cancel(task.id, other)).rejects.toMatchObject({ code: 'TASK_NOT_FOUND' });
    await expect(manager.logs(task.id, other)).rejects.toMatchObject({ code: 'TASK_NOT_FOUND' });
    expect((await manager.list(other)).tasks).toEqual([]);
    expect((await manager.list(me)).tasks.map((item) => item.id)).toEqual([task.id]);
  });

  it('queues tasks past the concurrency limit as pending', async () => {
    const runner = gatedRunner();
    manager = createTaskManager({ pool, run: runner.run, maxConcurrent: 1 });
    const first = await manager.start({ prompt: 'one' }, me);
    const second = await manager.start({ prompt: 'two' }, me);
    expect(second.status).toBe('pending');
    await vi.waitFor(() => expect(runner.calls).toHaveLength(1));
    expect((await manager.get(second.id, me)).status).toBe('pending');
    runner.release();
    await vi.waitFor(() => expect(runner.calls).toHaveLength(2));
    expect((await manager.get(first.id, me)).status).toBe('completed');
    expect((await manager.get(second.id, me)).status).toBe('running');
  });

  it('refuses a task past maxQueued waiting ones with TASK_QUEUE_FULL, and takes tasks again once the queue moves', async () => {
    const runner = gatedRunner();
    manager = createTaskManager({ pool, run: runner.run, maxConcurrent: 1, maxQueued: 2 });
    await manager.start({ prompt: 'running' }, me);
    await vi.waitFor(() => expect(runner.calls).toHaveLength(1));
    await manager.start({ prompt: 'queued 1' }, me);
    await manager.start({ prompt: 'queued 2' }, me);
    await expect(manager.start({ prompt: 'one too many' }, me)).rejects.toMatchObject({
      code: 'TASK_QUEUE_FULL',
      message: expect.stringContaining('2 tasks waiting (tasks.maxQueued 2)'),
    });
    expect(await manager.summary()).toMatchObject({ pending: 2, running: 1 });
    runner.release();
    await vi.waitFor(() => expect(runner.calls).toHaveLength(2));
    expect((await manager.start({ prompt: 'fits again' }, me)).status).toBe('pending');
  });

  it('lets exactly one of 100 concurrent cancels win, and never changes a terminal state', async () => {
    const runner = gatedRunner();
    manager = createTaskManager({ pool, run: runner.run });
    const task = await manager.start({ prompt: 'cancel me' }, me);
    await vi.waitFor(() => expect(runner.calls).toHaveLength(1));
    const outcomes = await Promise.all(Array.from({ length: 100 }, () => manager!.cancel(task.id, me)));
    expect(outcomes.filter((outcome) => outcome.cancelled)).toHaveLength(1);
    expect(outcomes.every((outcome) => outcome.task.status === 'cancelled')).toBe(true);
    expect(runner.calls[0]?.signal?.aborted).toBe(true);
    runner.release('too late');
    const after = await manager.get(task.id, me);
    expect(after).toMatchObject({ status: 'cancelled', cancelReason: 'cancelled by caller' });
    expect(after.result).toBeUndefined();
  });

  it('turns a thrown error into an `error` task while other tasks keep running', async () => {
    const runner = gatedRunner();
    let calls = 0;
    const run: AgentRunner = (options) => (++calls === 1 ? Promise.reject(new KlymError('MODEL_ERROR', 'the model is down')) : runner.run(options));
    manager = createTaskManager({ pool, run });
    const failing = await manager.start({ prompt: 'fail' }, me);
    const fine = await manager.start({ prompt: 'fine' }, me);
    await vi.waitFor(async () => expect((await manager!.get(failing.id, me)).status).toBe('error'));
    expect((await manager.get(failing.id, me)).error).toEqual({ code: 'MODEL_ERROR', message: 'the model is down' });
    runner.release('ok');
    await vi.waitFor(async () => expect((await manager!.get(fine.id, me)).status).toBe('completed'));
  });

  it('ends a task that runs past its wall-clock limit as TASK_TIMEOUT, even if the run ignores its signal', async () => {
    manager = createTaskManager({ pool, run: hangs, taskTimeoutMs: 50 });
    const task = await manager.start({ prompt: 'hang', budget: { timeoutMs: 10_000 } }, me);
    await vi.waitFor(async () => expect((await manager!.get(task.id, me)).status).toBe('error'));
    expect((await manager.get(task.id, me)).error?.code).toBe('TASK_TIMEOUT');
  });

  it('caps the run time budget by the task limit, and keeps a budget end as completed', async () => {
    const calls: RunAgentOptions[] = [];
    const run: AgentRunner = async (options) => (calls.push(options), result('half', 'budget:steps'));
    manager = createTaskManager({ pool, run, taskTimeoutMs: 1_000 });
    const short = await manager.start({ prompt: 'a', budget: { timeoutMs: 200, maxSteps: 2 } }, me);
    await manager.start({ prompt: 'b', budget: { timeoutMs: 5_000 } }, me);
    await vi.waitFor(() => expect(calls).toHaveLength(2));
    expect(calls[0]?.budget).toEqual({ timeoutMs: 200, maxSteps: 2 });
    expect(calls[1]?.budget).toEqual({});
    await vi.waitFor(async () => expect((await manager!.get(short.id, me)).status).toBe('completed'));
    // The run's own budget as the fake runner's result gives it (runResult's: 25 steps, 1 taken).
    expect((await manager.get(short.id, me)).result).toMatchObject({
      text: 'Stopped by the budget (max_steps 25: 1 step taken) before the work was done: this answer is partial.\n\nhalf',
      finishReason: 'budget:steps',
    });
  });

  it('evicts finished tasks after their TTL', async () => {
    manager = createTaskManager({ pool, run: async () => result('x'), ttlMs: 30 });
    const task = await manager.start({ prompt: 'x' }, me);
    await vi.waitFor(async () => expect(manager!.get(task.id, me)).rejects.toMatchObject({ code: 'TASK_NOT_FOUND' }), { timeout: 2_000 });
  });

  it('on close cancels what is left with the reason "shutdown" and refuses new tasks', async () => {
    const runner = gatedRunner();
    manager = createTaskManager({ pool, run: runner.run, maxConcurrent: 1 });
    const running = await manager.start({ prompt: 'a' }, me);
    const queued = await manager.start({ prompt: 'b' }, me);
    await vi.waitFor(() => expect(runner.calls).toHaveLength(1));
    await manager.close({ graceMs: 20 });
    for (const id of [running.id, queued.id]) expect(await manager.get(id, me)).toMatchObject({ status: 'cancelled', cancelReason: 'shutdown' });
    await expect(manager.start({ prompt: 'c' }, me)).rejects.toMatchObject({ code: 'SHUTTING_DOWN' });
  });

  it('leaves no task running when close() begins while start() is storing it', async () => {
    const runner = gatedRunner();
    // A store that takes a moment to write, as a durable one would.
    const memory = createMemoryTaskStore();
    const store: TaskStore = { ...memory, insert: async (task) => (await new Promise((resolve) => setTimeout(resolve, 20)), await memory.insert(task)) };
    const tasks = (manager = createTaskManager({ pool, run: runner.run, store }));
    const starting = tasks.start({ prompt: 'late' }, me);
    await tasks.close({ graceMs: 0 });
    const late = await starting;
    expect((await tasks.get(late.id, me)).status).toBe('cancelled');
    expect(runner.calls).toHaveLength(0);
    expect((await tasks.list(me)).tasks.filter((task) => task.status === 'running' || task.status === 'pending')).toEqual([]);
  });

  it('keeps secrets out of errors and logs', async () => {
    manager = createTaskManager({ pool, run: leaksSecret, defaults: { providers: { openai: { apiKey: 'sk-secret-123' } } } });
    const task = await manager.start({ prompt: 'x' }, me);
    await vi.waitFor(async () => expect((await manager!.get(task.id, me)).status).toBe('error'));
    const text = JSON.stringify([await manager.get(task.id, me), await manager.logs(task.id, me)]);
    expect(text).not.toContain('sk-secret-123');
    expect(text).toContain('[redacted]');
  });

  it('lets a run that ends within the shutdown grace period complete', async () => {
    const runner = gatedRunner();
    manager = createTaskManager({ pool, run: runner.run });
    const task = await manager.start({ prompt: 'quick' }, me);
    await vi.waitFor(() => expect(runner.calls).toHaveLength(1));
    const closing = manager.close({ graceMs: 5_000 });
    runner.release('made it');
    await closing;
    expect(await manager.get(task.id, me)).toMatchObject({ status: 'completed', result: { text: 'made it' } });
  });

  it('survives a runner that throws synchronously and listeners that throw', async () => {
    manager = createTaskManager({
      pool,
      run: throwsAtOnce,
      onEvent: () => {
        throw new Error('listener failure');
      },
    });
    const task = await manager.start({ prompt: 'x' }, me);
    await vi.waitFor(async () => expect((await manager!.get(task.id, me)).status).toBe('error'));
    expect((await manager.get(task.id, me)).error).toEqual({ code: 'INTERNAL', message: 'boom' });
  });

  it('refuses limits that are not positive numbers', () => {
    expect(() => createTaskManager({ pool, maxConcurrent: 0 })).toThrow(/`maxConcurrent` to be a positive number, got 0/);
  });

  it('takes a front of a shared queue that runs nothing, and refuses a shared queue without a store to share', async () => {
    expect(() => createTaskManager({ pool, queue: shared(), maxConcurrent: 0 })).toThrow(/shared task queue needs a `store`/);
    manager = createTaskManager({ pool, queue: shared(), store: createMemoryTaskStore(), maxConcurrent: 0 });
    expect(await manager.start({ prompt: 'for a worker' }, me)).toMatchObject({ status: 'pending', currentStep: 'queued' });
    expect(() => createTaskManager({ pool, queue: shared(), store: createMemoryTaskStore(), maxConcurrent: -1 })).toThrow(
      /`maxConcurrent` to be a number of at least 0, got -1/,
    );
  });
});
