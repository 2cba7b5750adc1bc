import { DelayedError, WaitingError, Worker, type Job, type RedisOptions } from 'bullmq';
import { KlymError } from '../../errors.ts';
import type { QueueLog } from './queue-log.ts';
import type { TaskConsumer } from './task-queue.ts';

/** What {@link startBullmqWorker} is given by the queue it belongs to. */
export interface BullmqWorkerSetup {
  readonly name: string;
  readonly prefix: string;
  /** Options of the worker's own connections (BullMQ opens two). */
  readonly connection: RedisOptions;
  readonly consumer: TaskConsumer;
  readonly lockDurationMs: number;
  readonly stalledIntervalMs: number;
  readonly maxStalledCount: number;
  /** Bounds each call of the worker's own to Redis (a connection down holds its commands until it is back). */
  readonly commandTimeoutMs: number;
  /** Whether Redis answers now (within `commandTimeoutMs`). */
  readonly reachable: () => Promise<boolean>;
  readonly log: QueueLog;
}

/** The part of a shared queue that runs tasks in this process. */
export interface BullmqWorker {
  /** Stops the run of a cancelled task, if it runs here. */
  abort(id: string): void;
  /** Asks the store about the tasks it runs, and stops those that ended: a cancel may have been missed. */
  recheck(): Promise<void>;
  /** Takes no new task, gives runs `graceMs` to end, then hands the rest back; closes its connections. */
  close(graceMs: number): Promise<void>;
}

interface LiveRun {
  readonly controller: AbortController;
  /** Set when the queue took the task from this run: on a graceful close, or when its lock was lost. */
  released: 'handed back' | 'lost' | undefined;
  readonly done: Promise<void>;
}

/** How long a task whose end the store could not take waits before a worker takes it up again. */
const RETRY_DELAY_MS = 1_000;

/**
 * Runs the tasks of a BullMQ queue in this process, `consumer.concurrency` at a time. A job is a task's
 * id; the task's state is the store's. BullMQ holds a lock on each job it runs here, renewed every half
 * `lockDurationMs`; a worker that died stops renewing it, and after at most `lockDurationMs` plus
 * `stalledIntervalMs` another worker's stalled check puts the job back and a worker resumes the task.
 */
export function startBullmqWorker(setup: BullmqWorkerSetup): BullmqWorker {
  const { consumer, log } = setup;
  const live = new Map<string, LiveRun>();
  let closing = false;

  const within = <T>(promise: Promise<T>, fallback: T): Promise<T> => {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<T>((resolve) => (timer = setTimeout(() => resolve(fallback), setup.commandTimeoutMs)));
    return Promise.race([promise.catch(() => fallback), late]).finally(() => clearTimeout(timer));
  };

  const release = (id: string, run: LiveRun, how: 'handed back' | 'lost'): void => {
    if (run.released !== undefined) return;
    run.released = how;
    run.controller.abort(new KlymError(how === 'lost' ? 'ABORTED' : 'SHUTTING_DOWN', `Task ${id} was ${how === 'lost' ? 'taken from this worker: its lock was lost' : 'handed back by a worker that is closing'}`));
  };

  const processor = async (job: Job, token: string | undefined, signal: AbortSignal | undefined): Promise<void> => {
    const id = job.id ?? '';
    // Fetched as the worker began closing: straight back, for another worker to take.
    if (closing || token === undefined) {
      await within(job.moveToWait(token), 0);
      throw new WaitingError();
    }
    const { promise: done, resolve: settle } = Promise.withResolvers<void>();
    const run: LiveRun = { controller: new AbortController(), released: undefined, done };
    live.set(id, run);
    // BullMQ's own abort (`worker.cancelJob`) reaches the run as a cancel would.
    const onSignal = (): void => run.controller.abort(signal?.reason);
    signal?.addEventListener('abort', onSignal, { once: true });
    try {
      const outcome = await consumer.run({
        id,
        signal: run.controller.signal,
        released: () => run.released !== undefined,
        holds: async () => {
          if (run.released !== undefined) return false;
          // Renewing the lock proves it is still this worker's; one that cannot be renewed is another's.
          const renewed = await within(job.extendLock(token, setup.lockDurationMs), -1);
          if (renewed === 0) release(id, run, 'lost');
          return renewed === 1;
        },
      });
      // The job is another worker's now, or will be once BullMQ finds it stalled: it is left as it is.
      if (run.released === 'lost') throw new WaitingError();
      if (run.released === 'handed back') {
        // Back to the queue at once, for a worker that is not closing (or, if Redis cannot be told, found stalled later).
        await within(job.moveToWait(token), 0);
        throw new WaitingError();
      }
      if (outcome === 'left') {
        // The store could not take the run's end: the task is taken up again from its checkpoint in a moment.
        await within(job.moveToDelayed(Date.now() + RETRY_DELAY_MS, token), undefined);
        throw new DelayedError();
      }
      // Ended: the job completes, and is removed.
    } finally {
      signal?.removeEventListener('abort', onSignal);
      if (live.get(id) === run) live.delete(id);
      settle();
    }
  };

  const worker = new Worker(setup.name, processor, {
    connection: setup.connection,
    prefix: setup.prefix,
    concurrency: consumer.concurrency,
    lockDuration: setup.lockDurationMs,
    stalledInterval: setup.stalledIntervalMs,
    maxStalledCount: setup.maxStalledCount,
    // After a call failed for want of Redis, BullMQ waits this long before it fetches again (15 s by default):
    // as long as a reconnect takes at most, so that a worker is back at work as soon as its Redis is.
    runRetryDelay: 2_000,
  });
  // A lock that could not be renewed is said once, by `lockRenewalFailed` below.
  worker.on('error', (error) => error.message.startsWith('could not renew lock') || log.failed(error));
  worker.on('ready', () => log.ready());
  // BullMQ's word for a connection of the worker's that closed while the worker was not closing.
  worker.on('ioredis:close', () => log.lost());
  worker.on('lockRenewalFailed', (ids) => {
    for (const id of ids) {
      const run = live.get(id);
      if (run === undefined || run.released !== undefined) continue;
      log.warning(`Task ${id}: this worker lost its lock on it (another worker may take it up), so its run here stopped`);
      release(id, run, 'lost');
    }
  });
  worker.on('failed', (job, error) => {
    if (job?.id === undefined) return;
    // BullMQ found the job stalled more than `maxStalledCount` times and failed it without a run.
    if (job.deferredFailure !== undefined) {
      const stops = job.stalledCounter === 1 ? 'once' : `${job.stalledCounter} times`;
      const why = (step: number): string =>
        `A worker running this task stopped without finishing it (after step ${step}), ${stops}: more than the queue's maxStalledCount of ${setup.maxStalledCount} allows, so it is not taken up again`;
      void consumer.interrupt(job.id, why).catch(() => {});
    } else {
      log.failed(error);
    }
  });

  const cancelled = (id: string): void => {
    const run = live.get(id);
    if (run !== undefined && run.released === undefined) run.controller.abort(new KlymError('ABORTED', `Task ${id} was cancelled`));
  };
  return {
    abort: cancelled,
    async recheck() {
      for (const [id, run] of live) if (run.released === undefined && (await consumer.hasEnded(id).catch(() => false))) cancelled(id);
    },
    async close(graceMs) {
      closing = true;
      // No new job: a fetch already under way is handed straight back by the processor.
      await worker.pause(true).catch((error: unknown) => log.failed(error));
      let timer: NodeJS.Timeout | undefined;
      const grace = new Promise<void>((resolve) => (timer = setTimeout(resolve, graceMs)));
      await Promise.race([Promise.all([...live.values()].map((run) => run.done)), grace]);
      clearTimeout(timer);
      for (const [id, run] of live) release(id, run, 'handed back');
      await Promise.all([...live.values()].map((run) => run.done));
      // BullMQ's close lets it finish with the jobs of the runs that ended (completing them), then quits. With
      // Redis away it would wait for ever (ioredis ends no connection it is waiting to reconnect): the
      // connections are cut instead, and a job left active is found stalled once Redis is back.
      if (await setup.reachable()) {
        const closed = worker.close().then(() => true, (error: unknown) => (log.failed(error), true));
        const late = new Promise<false>((resolve) => setTimeout(resolve, setup.commandTimeoutMs, false).unref());
        if (!(await Promise.race([closed, late]))) log.warning(`The task queue's worker did not finish closing within ${setup.commandTimeoutMs} ms: Redis went away meanwhile`);
        return;
      }
      await worker.close(true).catch((error: unknown) => log.failed(error));
    },
  };
}
