// What many Klym processes on one BullMQ queue must do together, over any store they can share: the store
// is a parameter, so the same suite runs on one memory store object and on the Redis store.
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { redisCommand, startRedisServer, type RedisServer } from './redis-server.ts';
import { ended, endsOf, eventsOf, logTypes, me, openRig, type OpenSharedStore, type SharedQueueRig } from './shared-queue.ts';

/**
 * The suite, for stores made by `stores()`: called once per test, it answers how each process of that test
 * opens its store.
 */
export function describeSharedQueue(label: string, stores: () => OpenSharedStore): void {
  describe(`Klym processes sharing a BullMQ queue (${label})`, () => {
    let redis: RedisServer;
    let rig: SharedQueueRig;
    beforeAll(async () => {
      redis = await startRedisServer();
    });
    afterAll(async () => {
      await redis.close();
    });
    afterEach(async () => {
      await rig.close();
    });
    const open = async (): Promise<SharedQueueRig> => (rig = await openRig(redis, stores()));

    it('runs a task started on a front on a worker, and the front sees its status, its log and its end', async () => {
      const { tracker } = await open();
      const front = await rig.front();
      const worker = await rig.worker();
      const task = await front.tasks.start({ prompt: 'quick check' }, me);
      // Accepted and queued for a worker, which may already have taken it by the time the start answers.
      expect(['pending', 'running']).toContain(task.status);
      expect(await ended(front.tasks, task.id)).toMatchObject({ status: 'completed', result: { finalText: 'Done.' } });
      expect(await logTypes(front.tasks, task.id)).toEqual(
        expect.arrayContaining(['task-create', 'task-start', 'run-start', 'llm-response', 'run-end', 'task-end']),
      );
      expect(tracker.runs.get(task.id)).toEqual([worker.name]);
      expect((await worker.tasks.get(task.id, me)).status).toBe('completed');
      // The front's listeners (an MCP session that started the task) hear of the end made on the worker, once.
      await expect.poll(() => endsOf(front, task.id), { timeout: 5_000 }).toEqual(['completed']);
      expect(endsOf(worker, task.id)).toEqual(['completed']);
    });

    it("tells a front's listeners of the start made on a worker, then of the end (MCP's notifications/tasks/status)", async () => {
      await open();
      const front = await rig.front();
      await rig.worker();
      const task = await front.tasks.start({ prompt: 'slow one' }, me);
      await ended(front.tasks, task.id);
      await expect.poll(() => eventsOf(front, task.id), { timeout: 5_000 }).toEqual(['task-create', 'task-start', 'task-end']);
      // Heard, not had: a listener counting what happened here (metrics) must not count them twice.
      expect(front.events.filter((event) => event.task.id === task.id).map((event) => 'elsewhere' in event && event.elsewhere === true)).toEqual([
        false,
        true,
        true,
      ]);
    });

    it('cancels from a front a run under way on a worker: its upstream call is cancelled, and the worker moves on', async () => {
      const { grynya, tracker } = await open();
      const front = await rig.front();
      const worker = await rig.worker();
      grynya.faults.hang = true;
      const task = await front.tasks.start({ prompt: 'tool query' }, me);
      await expect.poll(() => grynya.stats.calls.query_graph ?? 0, { timeout: 10_000 }).toBe(1);
      expect(await front.tasks.cancel(task.id, me)).toMatchObject({ cancelled: true, task: { status: 'cancelled' } });
      // The worker aborted the call, and the pool told grynya so.
      await expect.poll(() => grynya.stats.cancelled, { timeout: 5_000 }).toBe(1);
      grynya.faults.hang = false;
      const next = await front.tasks.start({ prompt: 'quick next' }, me);
      expect((await ended(front.tasks, next.id)).status).toBe('completed');
      expect(await worker.tasks.get(task.id, me)).toMatchObject({ status: 'cancelled', cancelReason: 'cancelled by caller' });
      expect(tracker.runs.get(task.id)).toEqual([worker.name]);
      expect(endsOf(front, task.id)).toEqual(['cancelled']);
      expect(endsOf(worker, task.id)).toEqual(['cancelled']);
    });

    it('cancels from a front a model request under way on a worker', async () => {
      const { tracker } = await open();
      const front = await rig.front();
      await rig.worker();
      const task = await front.tasks.start({ prompt: 'model thinking' }, me);
      await expect.poll(async () => (await front.tasks.get(task.id, me)).currentStep, { timeout: 10_000 }).toMatch(/waiting for the model/);
      await front.tasks.cancel(task.id, me);
      await expect.poll(() => tracker.modelAborted.has(task.id), { timeout: 5_000 }).toBe(true);
    });

    it('never runs a task cancelled while it waited in the queue', async () => {
      const { grynya, tracker } = await open();
      const front = await rig.front();
      await rig.worker();
      grynya.faults.hang = true;
      const busy = await front.tasks.start({ prompt: 'tool busy' }, me);
      await expect.poll(() => grynya.stats.calls.query_graph ?? 0, { timeout: 10_000 }).toBe(1);
      const waiting = await front.tasks.start({ prompt: 'quick waiting' }, me);
      expect(await front.tasks.cancel(waiting.id, me)).toMatchObject({ cancelled: true });
      await front.tasks.cancel(busy.id, me);
      const after = await front.tasks.start({ prompt: 'quick after' }, me);
      expect((await ended(front.tasks, after.id)).status).toBe('completed');
      expect(tracker.runs.has(waiting.id)).toBe(false);
      expect(await logTypes(front.tasks, waiting.id)).toEqual(['task-create', 'task-end']);
    });

    it('hands a running task back when its worker closes, and another worker resumes it without replaying the call in flight', async () => {
      const { grynya, tracker } = await open();
      const front = await rig.front();
      const first = await rig.worker();
      grynya.faults.hang = true;
      const task = await front.tasks.start({ prompt: 'tool handed on' }, me);
      await expect.poll(() => grynya.stats.calls.query_graph ?? 0, { timeout: 10_000 }).toBe(1);
      const second = await rig.worker();
      // Stalled-job detection is 30 s away: only a hand-back lets the second worker finish the task in time.
      await first.tasks.close({ graceMs: 50 });
      const done = await ended(front.tasks, task.id);
      expect(done).toMatchObject({ status: 'completed', resumes: [0], result: { finalText: 'The query was interrupted; I did not run it again.' } });
      expect(tracker.runs.get(task.id)).toEqual([first.name, second.name]);
      expect(grynya.stats.calls.query_graph).toBe(1);
      const entries = (await front.tasks.logs(task.id, me, { limit: 500 })).entries;
      expect(entries.filter((entry) => entry.type === 'task-resume').map((entry) => entry.data)).toEqual([
        { fromStep: 0, interruptedCalls: ['grynya__query_graph'] },
      ]);
      expect(entries.filter((entry) => entry.type === 'task-start' || entry.type === 'task-end')).toHaveLength(2);
    });

    it('ends a task handed back as TASK_INTERRUPTED where resumeOnRestart is off, its log intact', async () => {
      const { grynya, tracker } = await open();
      const front = await rig.front();
      const first = await rig.worker();
      grynya.faults.hang = true;
      const task = await front.tasks.start({ prompt: 'tool not resumed' }, me);
      await expect.poll(() => grynya.stats.calls.query_graph ?? 0, { timeout: 10_000 }).toBe(1);
      await rig.worker({ resumeOnRestart: false });
      await first.tasks.close({ graceMs: 0 });
      const done = await ended(front.tasks, task.id);
      expect(done).toMatchObject({
        status: 'error',
        error: { code: 'TASK_INTERRUPTED', message: expect.stringContaining('(after step 0); tasks.resumeOnRestart is off') },
      });
      expect(tracker.runs.get(task.id)).toEqual([first.name]);
      expect(await logTypes(front.tasks, task.id)).toEqual(expect.arrayContaining(['task-start', 'tool-call', 'task-end']));
    });

    it('lets a run that ends within the grace period finish on the worker that is closing', async () => {
      const { tracker } = await open();
      const front = await rig.front();
      const worker = await rig.worker();
      const task = await front.tasks.start({ prompt: 'slow but steady' }, me);
      await expect.poll(() => tracker.runs.has(task.id), { timeout: 10_000 }).toBe(true);
      await worker.tasks.close({ graceMs: 10_000 });
      expect(await front.tasks.get(task.id, me)).toMatchObject({ status: 'completed' });
      expect(await logTypes(front.tasks, task.id)).not.toContain('task-resume');
    });

    it('stops the run of a worker whose lock on its task was lost, and the task is resumed once', async () => {
      const { grynya, tracker } = await open();
      const front = await rig.front();
      const worker = await rig.worker({ queue: { lockDurationMs: 1_000, stalledIntervalMs: 500 } });
      grynya.faults.hang = true;
      const task = await front.tasks.start({ prompt: 'tool locked' }, me);
      await expect.poll(() => grynya.stats.calls.query_graph ?? 0, { timeout: 10_000 }).toBe(1);
      await deleteLock(redis, rig.queueName, task.id);
      // The worker stopped its run: the call it had in flight was cancelled.
      await expect.poll(() => grynya.stats.cancelled, { timeout: 10_000 }).toBe(1);
      expect(worker.lines.join('\n')).toMatch(new RegExp(`Task ${task.id}: this worker lost its lock`));
      const done = await ended(front.tasks, task.id);
      expect(done).toMatchObject({ status: 'completed', resumes: [0] });
      expect(tracker.overlap.get(task.id)).toBe(1);
      expect(grynya.stats.calls.query_graph).toBe(1);
    });

    it('ends a task taken over more than maxStalledCount times as TASK_INTERRUPTED', async () => {
      const { grynya } = await open();
      const front = await rig.front();
      await rig.worker({ queue: { lockDurationMs: 1_000, stalledIntervalMs: 500, maxStalledCount: 0 } });
      grynya.faults.hang = true;
      const task = await front.tasks.start({ prompt: 'tool stalled' }, me);
      await expect.poll(() => grynya.stats.calls.query_graph ?? 0, { timeout: 10_000 }).toBe(1);
      await deleteLock(redis, rig.queueName, task.id);
      const done = await ended(front.tasks, task.id);
      expect(done).toMatchObject({
        status: 'error',
        error: {
          code: 'TASK_INTERRUPTED',
          message: expect.stringMatching(/stopped without finishing it \(after step 0\), once: more than the queue's maxStalledCount of 0/),
        },
      });
    });

    it('runs each task once, and never one task on two workers at once', async () => {
      const { tracker } = await open();
      const front = await rig.front();
      const workers = [await rig.worker({ maxConcurrent: 2 }), await rig.worker({ maxConcurrent: 2 })];
      const started = await Promise.all(Array.from({ length: 8 }, (_, index) => front.tasks.start({ prompt: `slow ${index}` }, me)));
      for (const task of started) expect((await ended(front.tasks, task.id)).status).toBe('completed');
      for (const task of started) {
        expect(tracker.runs.get(task.id)).toHaveLength(1);
        expect(tracker.overlap.get(task.id)).toBe(1);
      }
      const ranOn = new Set(started.flatMap((task) => tracker.runs.get(task.id) ?? []));
      expect([...ranOn].every((name) => workers.some((worker) => worker.name === name))).toBe(true);
    });

    it('holds maxQueued across fronts', async () => {
      await open();
      const fronts = [await rig.front({ maxQueued: 2 }), await rig.front({ maxQueued: 2 })];
      await fronts[0]?.tasks.start({ prompt: 'quick one' }, me);
      await fronts[1]?.tasks.start({ prompt: 'quick two' }, me);
      for (const front of fronts) {
        await expect(front.tasks.start({ prompt: 'quick three' }, me)).rejects.toMatchObject({
          code: 'TASK_QUEUE_FULL',
          message: expect.stringContaining('2 tasks waiting (tasks.maxQueued 2)'),
        });
      }
      await rig.worker();
      await vi.waitFor(async () => expect((await fronts[0]?.tasks.summary())?.completed).toBe(2), { timeout: 10_000 });
      // Room again: accepted (a worker may already have taken it by the time the start answers).
      expect(['pending', 'running']).toContain((await fronts[1]?.tasks.start({ prompt: 'quick again' }, me))?.status);
    });
  });
}

/** What a worker's lock looks like when the worker's process stalled past it: gone. */
async function deleteLock(redis: RedisServer, queueName: string, id: string): Promise<void> {
  expect(await redisCommand(redis.port, 'DEL', `klym:bull:${queueName}:${id}:lock`)).toBe(':1');
}
