import { afterEach, describe, expect, it } from 'vitest';
import { createInProcessTaskQueue } from './in-process-queue.ts';
import type { TaskConsumer, TaskQueue } from './task-queue.ts';

/** Opens `queue` with a consumer whose runs last until the test ends them (or they are cancelled), with a running limit per principal. */
function heldRuns(queue: TaskQueue, concurrency: number, limits: Readonly<Record<string, number>> = {}) {
  const started: string[] = [];
  const ends = new Map<string, () => void>();
  const consumer: TaskConsumer = {
    concurrency,
    runningLimit: (principal) => limits[principal],
    run: (lease) =>
      new Promise((resolve) => {
        started.push(lease.id);
        ends.set(lease.id, () => resolve('ended'));
        lease.signal.addEventListener('abort', () => resolve('ended'), { once: true });
      }),
    // As the task manager's: the cancel reaches the run through the queue (its close cancels what it holds).
    cancel: (id) => queue.cancel(id, 'shutdown'),
    interrupt: async () => {},
    hasEnded: async () => false,
    heardElsewhere: () => {},
  };
  queue.open(consumer);
  return {
    started,
    /** Ends a run and lets the queue hand out the next ones. */
    async end(id: string) {
      ends.get(id)?.();
      await new Promise((resolve) => setImmediate(resolve));
    },
  };
}

/** Queues a principal's tasks as the task manager would: the k-th not yet ended has rank k. */
async function addRanked(queue: TaskQueue, principal: string, ids: readonly string[], firstRank = 1): Promise<void> {
  for (const [index, id] of ids.entries()) await queue.add(id, { principal, rank: firstRank + index });
}

let queue: TaskQueue | undefined;
afterEach(async () => {
  await queue?.close({ graceMs: 0 });
  queue = undefined;
});

describe('createInProcessTaskQueue', () => {
  it("starts a newcomer's first task before a heavy caller's second, then the heavy caller's in arrival order", async () => {
    queue = createInProcessTaskQueue();
    const runs = heldRuns(queue, 1);
    await addRanked(queue, 'alice', ['a1', 'a2', 'a3', 'a4']);
    await queue.add('b1', { principal: 'bob', rank: 1 });
    expect(runs.started).toEqual(['a1']);
    for (const id of ['a1', 'b1', 'a2', 'a3']) await runs.end(id);
    expect(runs.started).toEqual(['a1', 'b1', 'a2', 'a3', 'a4']);
  });

  it("keeps a principal's own tasks in arrival order when a later one comes with a better rank", async () => {
    queue = createInProcessTaskQueue();
    const runs = heldRuns(queue, 1);
    await queue.add('running', { principal: 'carol', rank: 1 });
    // Alice's first two were ranked when more of hers were unfinished; her third, after some ended, ranks 1.
    await queue.add('a-old', { principal: 'alice', rank: 5 });
    await queue.add('a-older', { principal: 'alice', rank: 6 });
    await queue.add('b1', { principal: 'bob', rank: 2 });
    await queue.add('a-new', { principal: 'alice', rank: 1 });
    // Alice's rank-1 turn goes to her oldest waiting task; bob's rank 2 comes next; her later turns to her later tasks.
    expect(await Promise.all(['a-old', 'b1', 'a-older', 'a-new'].map((id) => queue!.position(id)))).toEqual([0, 1, 2, 3]);
    for (const id of ['running', 'a-old', 'b1', 'a-older']) await runs.end(id);
    expect(runs.started).toEqual(['running', 'a-old', 'b1', 'a-older', 'a-new']);
  });

  it("passes over a principal at its running limit: its tasks wait in their turn while others' start", async () => {
    queue = createInProcessTaskQueue();
    const runs = heldRuns(queue, 2, { alice: 1 });
    await addRanked(queue, 'alice', ['a1', 'a2', 'a3']);
    // A slot is free, but alice has her one run.
    expect(runs.started).toEqual(['a1']);
    expect(await queue.waiting()).toBe(2);
    await queue.add('b1', { principal: 'bob', rank: 1 });
    await queue.add('b2', { principal: 'bob', rank: 2 });
    expect(runs.started).toEqual(['a1', 'b1']);
    // Bob's run ends: his second starts, alice still at her limit.
    await runs.end('b1');
    expect(runs.started).toEqual(['a1', 'b1', 'b2']);
    // Alice's ends: her next, and only one.
    await runs.end('a1');
    await runs.end('b2');
    expect(runs.started).toEqual(['a1', 'b1', 'b2', 'a2']);
    await runs.end('a2');
    expect(runs.started.at(-1)).toBe('a3');
  });

  it('says how many waiting tasks start before each, and moves those behind up when a waiting one is cancelled', async () => {
    queue = createInProcessTaskQueue();
    const runs = heldRuns(queue, 1);
    await addRanked(queue, 'alice', ['a1', 'a2', 'a3']);
    await addRanked(queue, 'bob', ['b1', 'b2']);
    // a1 runs; turns: b1 (1), a2 (2), b2 (2, later), a3 (3).
    const positions = async (): Promise<Record<string, number | undefined>> =>
      Object.fromEntries(await Promise.all(['a1', 'a2', 'a3', 'b1', 'b2', 'gone'].map(async (id) => [id, await queue!.position(id)])));
    expect(await positions()).toEqual({ a1: undefined, a2: 1, a3: 3, b1: 0, b2: 2, gone: undefined });
    await queue.cancel('a2', 'cancelled by caller');
    expect(await positions()).toEqual({ a1: undefined, a2: undefined, a3: 2, b1: 0, b2: 1, gone: undefined });
    expect(await queue.waiting()).toBe(3);
    for (const id of ['a1', 'b1', 'b2']) await runs.end(id);
    expect(runs.started).toEqual(['a1', 'b1', 'b2', 'a3']);
  });

  it('queues a task without a placement between the rank-1 and rank-2 tasks; adding a queued or running task again changes nothing', async () => {
    queue = createInProcessTaskQueue();
    const runs = heldRuns(queue, 1);
    await queue.add('running', { principal: 'alice', rank: 1 });
    await queue.add('a2', { principal: 'alice', rank: 2 });
    await queue.add('unplaced');
    await queue.add('b1', { principal: 'bob', rank: 1 });
    for (const id of ['running', 'a2', 'unplaced']) await queue.add(id, { principal: 'alice', rank: 9 });
    expect(await queue.waiting()).toBe(3);
    for (const id of ['running', 'b1', 'unplaced']) await runs.end(id);
    expect(runs.started).toEqual(['running', 'b1', 'unplaced', 'a2']);
  });
});
