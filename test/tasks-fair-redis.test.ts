// Fair turns between principals on the shared BullMQ queue (issue #33), over a real redis-server: fronts and
// workers are task queues opened with a small consumer (test/support/fair-queue.ts), so each test places its
// tasks itself and ends each run when it chooses. A task's principal is its id's first letter.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import path from 'node:path';
import type { BullmqTaskQueue } from '@klym/core/redis';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { backlog, createRunBook, openQueue, type QueueProcess, type RunBook } from './support/fair-queue.ts';
import { redisCommand, startRedisServer, type RedisServer } from './support/redis-server.ts';

const WORKER = path.join(import.meta.dirname, 'support', 'fair-queue-worker.ts');

/** Queues `tasks` from `queue`, one after another, at their placements. */
async function queueAll(queue: BullmqTaskQueue, tasks: ReturnType<typeof backlog>): Promise<void> {
  for (const [id, placement] of tasks) await queue.add(id, placement);
}

const ids = (tasks: ReturnType<typeof backlog>): string[] => tasks.map(([id]) => id);

describe('fair turns on a shared BullMQ queue', () => {
  let redis: RedisServer;
  let book: RunBook;
  let name: string;
  let tests = 0;
  const opened: BullmqTaskQueue[] = [];
  const children: ChildProcess[] = [];

  beforeAll(async () => {
    redis = await startRedisServer();
  });
  afterAll(async () => {
    await redis.close();
  });
  beforeEach(() => {
    book = createRunBook();
    // A queue per test, so that no test sees another's jobs.
    name = `fair${process.pid}x${++tests}`;
  });
  afterEach(async () => {
    for (const child of children.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    for (const queue of opened.splice(0).toReversed()) await queue.close({ graceMs: 0 });
  });

  const open = async (process: QueueProcess): Promise<BullmqTaskQueue> => {
    const queue = await openQueue(redis.url, name, book, process);
    opened.push(queue);
    return queue;
  };
  const front = (label = 'front'): Promise<BullmqTaskQueue> => open({ name: label, concurrency: 0 });
  const order = (): string[] => book.starts.map((start) => start.id);
  /** BullMQ's delayed set: where a task whose principal is at its cap is parked. */
  const parked = async (): Promise<number> => Number((await redisCommand(redis.port, 'ZCARD', `klym:bull:${name}:delayed`)).slice(1));

  /** A worker process (support/fair-queue-worker.ts: A capped at 1, runs that never end, 1 s locks), once it is ready. */
  const childWorker = async (): Promise<{ said: () => string; kill: () => Promise<void> }> => {
    const child = spawn(process.execPath, ['--conditions=klym-source', WORKER, redis.url, name], { stdio: ['ignore', 'pipe', 'pipe'] });
    children.push(child);
    let said = '';
    child.stdout.on('data', (chunk: Buffer) => (said += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (said += chunk.toString()));
    await expect.poll(() => said, { timeout: 15_000 }).toContain('ready');
    return {
      said: () => said,
      async kill() {
        const exited = once(child, 'exit');
        child.kill('SIGKILL');
        await exited;
      },
    };
  };

  /**
   * Ends runs one at a time, the oldest under way first, until `count` have ended; each waits for a run to be
   * under way. With `starts`, the runs to begin in all, it also waits for the freed worker to begin its next run
   * before it ends another, so that no two workers take tasks at the same moment and the order of starts is
   * the order the queue hands tasks out.
   */
  const endRuns = async (count: number, starts?: number): Promise<void> => {
    for (let ended = 0; ended < count; ended++) {
      await expect.poll(() => book.underWay.size, { timeout: 15_000 }).toBeGreaterThan(0);
      const [oldest] = book.underWay.keys();
      const begun = book.starts.length;
      book.finish(oldest as string);
      await expect.poll(() => book.underWay.has(oldest as string)).toBe(false);
      if (starts !== undefined && begun < starts) await expect.poll(() => book.starts.length).toBeGreaterThan(begun);
    }
  };

  it("starts a newcomer's first task before a heavy caller's backlog, across two workers", async () => {
    await open({ name: 'worker-1', concurrency: 1 });
    await open({ name: 'worker-2', concurrency: 1 });
    const queue = await front();
    const heavy = backlog('A', 40);
    await queueAll(queue, heavy);
    // Both workers took one of A's at once; the other 38 wait.
    await expect.poll(() => book.underWay.size).toBe(2);
    await queue.add('b01', { principal: 'B', rank: 1 });
    expect(await queue.position('b01')).toBe(0);
    expect(await queue.position('a03')).toBe(1);
    await endRuns(41, 41);
    // B's task is the first to start once a worker is free: before 38 of A's 40, though it came after them all.
    expect(order().indexOf('b01')).toBe(2);
    // A's own tasks in the order they came: the first two were taken by the two workers at once, so either may
    // have begun first; after them, one run ends at a time and the next of A's begins.
    const as = order().filter((id) => id !== 'b01');
    expect(new Set(as.slice(0, 2))).toEqual(new Set(ids(heavy).slice(0, 2)));
    expect(as.slice(2)).toEqual(ids(heavy).slice(2));
    expect(new Set(book.starts.map((start) => start.on))).toEqual(new Set(['worker-1', 'worker-2']));
  });

  it('tells a waiting task its place from any front, and the place falls as the tasks ahead start', async () => {
    const queue = await front();
    const other = await front('other front');
    await queueAll(queue, backlog('A', 40));
    await queue.add('b01', { principal: 'B', rank: 1 });
    // Only A's first (rank 1 too, but it came first) starts before B's.
    expect(await other.position('b01')).toBe(1);
    expect(await other.position('a01')).toBe(0);
    expect(await other.position('a02')).toBe(2);
    expect(await other.position('a40')).toBe(40);
    expect(await other.position('z99')).toBeUndefined();
    expect(await other.waiting()).toBe(41);
    // Without a placement: behind every rank-1 task, ahead of every rank-2 one.
    await queue.add('x01');
    expect(await other.position('x01')).toBe(2);
    expect(await other.position('a02')).toBe(3);
    await expect(queue.add('a99', { principal: 'A', rank: 0 })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: expect.stringContaining('`placement.rank`'),
    });

    await open({ name: 'worker-1', concurrency: 1 });
    await expect.poll(() => book.underWay.has('a01')).toBe(true);
    expect(await other.position('a01')).toBeUndefined();
    expect(await other.position('b01')).toBe(0);
    await open({ name: 'worker-2', concurrency: 1 });
    await expect.poll(() => book.underWay.has('b01')).toBe(true);
    expect(await other.position('b01')).toBeUndefined();
    expect(await other.position('x01')).toBe(0);
    expect(await queue.waiting()).toBe(40);
  });

  it("starts a principal's tasks in the order they came, even when a later one brought a better rank", async () => {
    const queue = await front();
    // a02 came after a01 with a better rank (some of A's tasks had ended meanwhile): A's best turn goes to a01.
    await queue.add('a01', { principal: 'A', rank: 3 });
    await queue.add('b01', { principal: 'B', rank: 2 });
    await queue.add('a02', { principal: 'A', rank: 1 });
    expect([await queue.position('a01'), await queue.position('b01'), await queue.position('a02')]).toEqual([0, 1, 2]);
    await open({ name: 'worker', concurrency: 1 });
    await endRuns(3);
    expect(order()).toEqual(['a01', 'b01', 'a02']);
  });

  it("caps a principal's runs at once across workers, while other principals' tasks run", async () => {
    const limits = { A: 1 };
    await open({ name: 'worker-1', concurrency: 1, limits });
    await open({ name: 'worker-2', concurrency: 1, limits });
    const queue = await front();
    const capped = backlog('A', 5);
    await queueAll(queue, capped);
    await queueAll(queue, backlog('B', 3));
    await endRuns(8);
    expect(order().toSorted()).toEqual(['a01', 'a02', 'a03', 'a04', 'a05', 'b01', 'b02', 'b03']);
    expect(book.peak.get('A')).toBe(1);
    // A's cap kept a worker for B: they ran side by side.
    expect([...book.together]).toContain('A+B');
    expect(order().filter((id) => id.startsWith('a'))).toEqual(ids(capped));
  });

  it('runs two of one principal at once on two workers when it has no cap', async () => {
    await open({ name: 'worker-1', concurrency: 1 });
    await open({ name: 'worker-2', concurrency: 1 });
    await queueAll(await front(), backlog('A', 3));
    await endRuns(3);
    expect(book.peak.get('A')).toBe(2);
  });

  it("frees a principal's slot when its worker closes mid-run: its next task runs", async () => {
    const limits = { A: 1 };
    const first = await open({ name: 'worker-1', concurrency: 1, limits });
    const queue = await front();
    await queue.add('a01', { principal: 'A', rank: 1 });
    await expect.poll(() => book.underWay.get('a01')).toBe('worker-1');
    await open({ name: 'worker-2', concurrency: 1, limits });
    await queue.add('b01', { principal: 'B', rank: 1 });
    await expect.poll(() => book.underWay.get('b01')).toBe('worker-2');
    await queue.add('a02', { principal: 'A', rank: 2 });
    // Worker 1 hands a01 back as it closes, and a01 is cancelled before any worker takes it up again.
    await first.close({ graceMs: 0 });
    await queue.cancel('a01', 'cancelled by caller');
    book.finish('b01');
    // A's slot went with a01's run: a02 starts on the worker b01 freed (a slot kept would have parked it for 30 s).
    await endRuns(1);
    expect(book.starts).toEqual([
      { id: 'a01', on: 'worker-1' },
      { id: 'b01', on: 'worker-2' },
      { id: 'a02', on: 'worker-2' },
    ]);
  });

  it("frees a principal's slot when its worker is killed mid-run and its task is not taken up again", async () => {
    const child = await childWorker();
    const queue = await front();
    await queue.add('a01', { principal: 'A', rank: 1 });
    await expect.poll(child.said).toContain('started a01');
    // Worker 2 fails a job whose worker stopped (maxStalledCount 0) rather than resuming it.
    await open({ name: 'worker-2', concurrency: 1, limits: { A: 1 }, queue: { lockDurationMs: 1_000, stalledIntervalMs: 500, maxStalledCount: 0 } });
    await queue.add('a02', { principal: 'A', rank: 2 });
    await expect.poll(parked).toBe(1);
    await child.kill();
    await endRuns(1);
    expect(book.starts).toEqual([{ id: 'a02', on: 'worker-2' }]);
  });

  it("frees a principal's slot when its worker is killed mid-run: the task is taken over and the next one runs", async () => {
    const child = await childWorker();
    const queue = await front();
    await queue.add('a01', { principal: 'A', rank: 1 });
    await expect.poll(child.said).toContain('started a01');
    await open({ name: 'worker-2', concurrency: 1, limits: { A: 1 }, queue: { lockDurationMs: 1_000, stalledIntervalMs: 500 } });
    await queue.add('a02', { principal: 'A', rank: 2 });
    // Parked: A's one slot is the child's.
    await expect.poll(parked).toBe(1);
    await child.kill();
    // The dead worker's slot lapses with its lock; a01 is taken over, and a02 runs too, one at a time.
    await endRuns(2);
    expect(order().toSorted()).toEqual(['a01', 'a02']);
    expect(book.starts.every((start) => start.on === 'worker-2')).toBe(true);
    expect(book.peak.get('A')).toBe(1);
  });
});
