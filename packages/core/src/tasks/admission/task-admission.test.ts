// Fair turns and quotas per principal, as a caller of the task manager meets them (issue #33).
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { SessionPool } from '../../pool/session-pool.ts';
import { runResult } from '../../testing/run-result.ts';
import { createInProcessTaskQueue } from '../queue/in-process-queue.ts';
import type { TaskQueue } from '../queue/task-queue.ts';
import { createMemoryTaskStore } from '../store/memory-task-store.ts';
import { createTaskManager } from '../task-manager.ts';
import type { AgentRunner, TaskManager } from '../task-manager-types.ts';
import type { TaskRecord } from '../store/task-types.ts';

const pool = { upstreams: [], openScope: () => ({ close: async () => {} }) } as unknown as SessionPool;
const alice = { principal: 'alice' };
const bob = { principal: 'bob' };

/** A runner whose runs last until the test ends them by prompt; it records the prompts in the order their runs began. */
function runsByPrompt(): { run: AgentRunner; began: string[]; end: (prompt: string) => void; running: () => string[] } {
  const began: string[] = [];
  const ends = new Map<string, () => void>();
  const run: AgentRunner = (options) =>
    new Promise((resolve) => {
      began.push(options.prompt);
      const done = (): void => {
        ends.delete(options.prompt);
        resolve(runResult(`done ${options.prompt}`));
      };
      ends.set(options.prompt, done);
      options.signal?.addEventListener('abort', done, { once: true });
    });
  return { run, began, end: (prompt) => ends.get(prompt)?.(), running: () => [...ends.keys()] };
}

/** A task as a process that died left it, created `second` seconds into 2026. */
const left = (id: string, principal: string, second: number, status: TaskRecord['status'] = 'pending'): TaskRecord => ({
  id,
  principal,
  request: { prompt: id },
  status,
  createdAt: new Date(Date.UTC(2026, 0, 1, 0, 0, second)).toISOString(),
  currentStep: status,
  usage: { steps: 0, inputTokens: 0, outputTokens: 0, totalTokens: 0, costUsd: undefined },
});

let manager: TaskManager | undefined;
afterEach(async () => {
  await manager?.close({ graceMs: 0 });
  manager = undefined;
});

describe('fair turns between principals', () => {
  it("starts a newcomer's first task before a heavy caller's second, and says each waiting task's place", async () => {
    const runs = runsByPrompt();
    manager = createTaskManager({ pool, run: runs.run, maxConcurrent: 1 });
    const theirs: TaskRecord[] = [];
    for (const prompt of ['a1', 'a2', 'a3', 'a4']) theirs.push(await manager.start({ prompt }, alice));
    const mine = await manager.start({ prompt: 'b1' }, bob);
    expect(mine).toMatchObject({ status: 'pending', currentStep: 'queued' });
    // Behind a1's run: b1 is next, though alice's three came first.
    expect((await manager.read(mine.id, bob, { tail: 1 })).queuePosition).toBe(0);
    expect((await manager.read(theirs[3]!.id, alice, { tail: 1 })).queuePosition).toBe(3);
    expect((await manager.read(theirs[0]!.id, alice, { tail: 1 })).queuePosition).toBeUndefined();
    for (const prompt of ['a1', 'b1', 'a2', 'a3']) {
      await vi.waitFor(() => expect(runs.running()).toContain(prompt));
      runs.end(prompt);
    }
    await vi.waitFor(() => expect(runs.began).toEqual(['a1', 'b1', 'a2', 'a3', 'a4']));
  });

  it('takes up after a restart in the turns the tasks had: each ranked by its principal’s unfinished tasks created before it', async () => {
    const store = createMemoryTaskStore();
    const tasks = [left('a1', 'alice', 1, 'running'), left('a2', 'alice', 2), left('a3', 'alice', 3), left('b1', 'bob', 4)];
    for (const task of tasks) await store.insert(task);
    const runs = runsByPrompt();
    manager = createTaskManager({ pool, run: runs.run, store, maxConcurrent: 1 });
    await vi.waitFor(() => expect(runs.began).toEqual(['a1']));
    for (const prompt of ['a1', 'b1', 'a2']) {
      await vi.waitFor(() => expect(runs.running()).toContain(prompt));
      runs.end(prompt);
    }
    await vi.waitFor(() => expect(runs.began).toEqual(['a1', 'b1', 'a2', 'a3']));
  });
});

describe('quotas per principal', () => {
  it('refuses a start past the caller’s maxQueued with QUOTA_EXCEEDED and its numbers, while others start', async () => {
    const runs = runsByPrompt();
    manager = createTaskManager({ pool, run: runs.run, maxConcurrent: 1, perPrincipal: { maxQueued: 2 } });
    for (const prompt of ['a1', 'a2', 'a3']) await manager.start({ prompt }, alice);
    await vi.waitFor(() => expect(runs.began).toEqual(['a1']));
    const refusal = await manager.start({ prompt: 'a4' }, alice).catch((error: unknown) => error);
    expect(refusal).toMatchObject({
      code: 'QUOTA_EXCEEDED',
      message: expect.stringMatching(/^Principal alice has 2 tasks waiting, its maxQueued is 2 \(tasks\.perPrincipal\.maxQueued\): try again when/),
      quota: 'maxQueued',
      limit: 2,
      used: 2,
      // No run has ended yet to tell how long one takes.
      retryAfterMs: 30_000,
    });
    expect(await manager.start({ prompt: 'b1' }, bob)).toMatchObject({ status: 'pending' });
    expect(await manager.usage(alice)).toEqual({
      principal: 'alice',
      limits: { maxQueued: 2 },
      running: 1,
      queued: 2,
      today: { spent: { tokens: 0, usd: 0 }, resetsAt: expect.any(String) },
    });
    expect(await manager.usage(bob)).toEqual({
      principal: 'bob',
      limits: { maxQueued: 2 },
      running: 0,
      queued: 1,
      today: { spent: { tokens: 0, usd: 0 }, resetsAt: expect.any(String) },
    });
    // One of hers started: she may queue one more.
    runs.end('a1');
    await vi.waitFor(() => expect(runs.began).toEqual(['a1', 'b1']));
    runs.end('b1');
    await vi.waitFor(() => expect(runs.began).toEqual(['a1', 'b1', 'a2']));
    expect(await manager.start({ prompt: 'a4' }, alice)).toMatchObject({ status: 'pending' });
  });

  it.each([
    ['an in-process queue, which counts them itself', false],
    ['a queue whose counts come from the store, as a shared one’s do', true],
  ])('holds maxQueued exactly when a caller’s starts arrive all at once, and others’ starts do not wait on them: %s', async (_queue, fromStore) => {
    const runs = runsByPrompt();
    const inProcess = createInProcessTaskQueue();
    const queue: TaskQueue = fromStore ? { ...inProcess, usage: undefined } : inProcess;
    manager = createTaskManager({ pool, run: runs.run, maxConcurrent: 1, queue, perPrincipal: { maxQueued: 2 } });
    await manager.start({ prompt: 'a0' }, alice);
    await vi.waitFor(() => expect(runs.began).toEqual(['a0']));
    const prompts = Array.from({ length: 10 }, (_, index) => `a${index + 1}`);
    const outcomes = await Promise.allSettled([...prompts.map((prompt) => manager!.start({ prompt }, alice)), manager.start({ prompt: 'b1' }, bob)]);
    const theirs = outcomes.slice(0, 10);
    expect(theirs.filter((outcome) => outcome.status === 'fulfilled')).toHaveLength(2);
    for (const outcome of theirs.filter((one) => one.status === 'rejected')) {
      expect(outcome.reason).toMatchObject({ code: 'QUOTA_EXCEEDED', quota: 'maxQueued', limit: 2, used: 2 });
    }
    expect(outcomes[10]).toMatchObject({ status: 'fulfilled', value: { status: 'pending' } });
    expect(await manager.usage(alice)).toMatchObject({ running: 1, queued: 2 });
  });

  it('runs at most maxRunning of a principal’s tasks at once; the rest wait, not refused, while others take the free slots', async () => {
    const runs = runsByPrompt();
    manager = createTaskManager({ pool, run: runs.run, maxConcurrent: 3, perPrincipal: { maxRunning: 1, overrides: { batch: { maxRunning: 2 } } } });
    for (const prompt of ['a1', 'a2', 'a3']) await manager.start({ prompt }, alice);
    const waiting = await manager.start({ prompt: 'a4' }, alice);
    expect(waiting).toMatchObject({ status: 'pending', currentStep: 'queued' });
    await manager.start({ prompt: 'b1' }, bob);
    for (const prompt of ['batch1', 'batch2', 'batch3']) await manager.start({ prompt }, { principal: 'batch' });
    await vi.waitFor(() => expect(runs.running().toSorted()).toEqual(['a1', 'b1', 'batch1']));
    runs.end('b1');
    // Bob's slot goes to batch's second (its override allows 2), not to alice (at her 1).
    await vi.waitFor(() => expect(runs.running().toSorted()).toEqual(['a1', 'batch1', 'batch2']));
    expect(await manager.usage({ principal: 'batch' })).toMatchObject({ limits: { maxRunning: 2 }, running: 2, queued: 1 });
    runs.end('a1');
    await vi.waitFor(() => expect(runs.running().toSorted()).toEqual(['a2', 'batch1', 'batch2']));
    expect(runs.began.filter((prompt) => prompt.startsWith('a'))).toEqual(['a1', 'a2']);
  });

  it('asks a refused caller to wait about one run: 30 s until a run has ended, then the median run time, in whole seconds', async () => {
    const runs = runsByPrompt();
    manager = createTaskManager({ pool, run: runs.run, maxConcurrent: 1, maxQueued: 1 });
    await manager.start({ prompt: 'runs' }, alice);
    await manager.start({ prompt: 'waits' }, alice);
    await expect(manager.start({ prompt: 'refused' }, bob)).rejects.toMatchObject({ code: 'TASK_QUEUE_FULL', limit: 1, used: 1, retryAfterMs: 30_000 });
    runs.end('runs');
    await vi.waitFor(() => expect(runs.running()).toEqual(['waits']));
    await manager.start({ prompt: 'waits too' }, alice);
    // A run of a few milliseconds: a second, the least a Retry-After says.
    await expect(manager.start({ prompt: 'refused' }, bob)).rejects.toMatchObject({ code: 'TASK_QUEUE_FULL', retryAfterMs: 1_000 });
  });

  it('refuses limits that are not positive integers, naming them', () => {
    expect(() => createTaskManager({ pool, perPrincipal: { maxQueued: 0 } })).toThrow('Expected `perPrincipal.maxQueued` to be a positive integer, got 0');
    expect(() => createTaskManager({ pool, perPrincipal: { overrides: { batch: { maxRunning: 1.5 } } } })).toThrow(
      'Expected `perPrincipal.overrides.batch.maxRunning` to be a positive integer, got 1.5',
    );
  });
});
