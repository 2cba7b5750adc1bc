import { DelayedError, Job, WaitingError, Worker, type Queue, type RedisOptions } from 'bullmq';
import { KlymError } from '../../errors.ts';
import { principalOf, type PrincipalTurns } from './principal-turns.ts';
import type { QueueLog } from './queue-log.ts';
import type { TaskConsumer } from './task-queue.ts';

/** What {@link startBullmqWorker} is given by the queue it belongs to. */
export interface BullmqWorkerSetup {
  readonly name: string;
  readonly prefix: string;
  /** Options of the worker's own connections (BullMQ opens two). */
  readonly connection: RedisOptions;
  readonly consumer: TaskConsumer;
  /** The queue's own handle on its jobs: to give a turn to another job, and to wake a parked one. */
  readonly jobs: Queue;
  /** The principals' turns and running slots, beside the queue's keys. */
  readonly turns: PrincipalTurns;
  readonly lockDurationMs: number;
  readonly stalledIntervalMs: number;
  readonly maxStalledCount: number;
  /** Bounds each call of the worker's own to Redis (a connection down holds its commands until it is back). */
  readonly commandTimeoutMs: number;
  /** Whether Redis answers now (within `commandTimeoutMs`). */
  readonly reachable: () => Promise<boolean>;
  readonly log: QueueLog;
}

/** A principal's cap on runs at once, as the consumer says it; `undefined`: none. */
function capOf(consumer: TaskConsumer, principal: string): number | undefined {
  const limit = consumer.runningLimit?.(principal);
  return limit !== undefined && Number.isFinite(limit) && limit >= 0 ? Math.floor(limit) : undefined;
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
  readonly job: Job;
  readonly token: string;
  /** The principal whose running slot this run holds (its cap), if it holds one. */
  readonly slotOf: string | undefined;
  readonly controller: AbortController;
  /** Set when the queue took the task from this run: on a graceful close, or when its lock was lost. */
  released: 'handed back' | 'lost' | undefined;
  /** Set once the run is over: its job is being moved on, and its lock is no longer renewed here. */
  over: boolean;
  readonly done: Promise<void>;
}

/** How long a task whose end the store could not take waits before a worker takes it up again. */
const RETRY_DELAY_MS = 1_000;

/** Parked tasks woken one after another at most, when the first ones are gone (cancelled while parked). */
const MAX_WAKES = 10;

/** Times a task that came up looks again for an older task of its principal to take its turn, when the one found was gone. */
const MAX_LOOKS = 10;

/**
 * Runs the tasks of a BullMQ queue in this process, `consumer.concurrency` at a time. A job is a task's
 * id; the task's state is the store's. BullMQ holds a lock on each job it runs here, renewed every half
 * `lockDurationMs`; a worker that died stops renewing it, and after at most `lockDurationMs` plus
 * `stalledIntervalMs` another worker's stalled check puts the job back and a worker resumes the task.
 *
 * A placed task that comes up (BullMQ hands them out by priority: their rank) first takes its principal's
 * turn (`turns.start`): an older task of the principal still waiting takes the turn instead; a principal at
 * its `consumer.runningLimit` has the task parked in BullMQ's delayed set until one of its runs ends here or
 * on another worker and wakes it; otherwise the run holds a slot of the principal's until it ends.
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
    run.controller.abort(
      new KlymError(
        how === 'lost' ? 'ABORTED' : 'SHUTTING_DOWN',
        `Task ${id} was ${how === 'lost' ? 'taken from this worker: its lock was lost' : 'handed back by a worker that is closing'}`,
      ),
    );
  };

  /** Wakes a parked task: `gone` when its job is (cancelled while parked), `awake` when it waits to be fetched or runs. */
  const wake = async (id: string): Promise<'gone' | 'awake'> => {
    const job = await Job.fromId(setup.jobs, id);
    if (job === undefined) return 'gone';
    // Not in the delayed set any more: it is waiting or running already.
    await job.promote().catch(() => {});
    return 'awake';
  };

  /** Frees a run's slot (none when `id` is undefined) and wakes the principal's first parked task that is still there. */
  const releaseSlot = async (principal: string, id: string | undefined): Promise<void> => {
    let next = await within(setup.turns.release(principal, id), undefined);
    for (let wakes = 0; next !== undefined && wakes < MAX_WAKES; wakes++) {
      if ((await within(wake(next), 'awake')) === 'awake') return;
      next = await within(setup.turns.release(principal), undefined);
    }
  };

  /**
   * Gives the turn `job` came up with to `older`, a task of its principal that came before it and still
   * waits: `older` goes to the head of `job`'s priority (woken first if it was parked), `job` back to the
   * worse of the two. False when `older` is gone.
   */
  const giveTurn = async (job: Job, token: string, older: string): Promise<boolean> => {
    const other = await Job.fromId(setup.jobs, older);
    if (other === undefined) return false;
    const [better, worse] = [Math.min(job.priority, other.priority), Math.max(job.priority, other.priority)];
    await other.changePriority({ priority: better, lifo: true });
    // A parked one only had its priority changed: it enters the prioritized set now (not delayed: already there).
    await other.promote().catch(() => {});
    if (worse !== job.priority) await job.changePriority({ priority: worse });
    await job.moveToWait(token);
    return true;
  };

  /**
   * Takes the turn of a placed task that came up. Returns when it may run (holding a slot of its principal's
   * when capped); else throws BullMQ's word for a job moved elsewhere: parked (`DelayedError`), its turn given
   * to an older task of its principal (`WaitingError`), or tried again in a moment when Redis did not answer.
   */
  const takeTurn = async (job: Job, token: string, principal: string, limit: number | undefined): Promise<void> => {
    const id = job.id ?? '';
    for (let looks = 0; ; looks++) {
      const verdict = await within(setup.turns.start(principal, id, limit), undefined);
      if (verdict?.kind === 'run') return;
      if (verdict?.kind === 'older' && looks < MAX_LOOKS) {
        const given = await within(giveTurn(job, token, verdict.id), undefined);
        if (given === true) throw new WaitingError();
        if (given === false) continue;
      }
      if (verdict?.kind === 'full' && limit !== undefined) {
        // Parked until a run of the principal ends and wakes it; looked at again after `lockDurationMs` at the
        // latest, which is when the slot of a worker that died lapses.
        await within(job.moveToDelayed(Date.now() + setup.lockDurationMs, token), undefined);
        if (await within(setup.turns.park(principal, id, limit), false)) await within(wake(id), 'awake');
        throw new DelayedError();
      }
      // Redis did not answer (or an older task could not be given the turn): it comes up again in a moment.
      await within(job.moveToDelayed(Date.now() + RETRY_DELAY_MS, token), undefined);
      throw new DelayedError();
    }
  };

  const processor = async (job: Job, token: string | undefined, signal: AbortSignal | undefined): Promise<void> => {
    const id = job.id ?? '';
    // Fetched as the worker began closing: straight back, for another worker to take.
    if (closing || token === undefined) {
      await within(job.moveToWait(token), 0);
      throw new WaitingError();
    }
    const principal = principalOf(job.data);
    const limit = principal === undefined ? undefined : capOf(consumer, principal);
    if (principal !== undefined) await takeTurn(job, token, principal, limit);
    const { promise: done, resolve: settle } = Promise.withResolvers<void>();
    const run: LiveRun = {
      job,
      token,
      slotOf: limit === undefined ? undefined : principal,
      controller: new AbortController(),
      released: undefined,
      over: false,
      done,
    };
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
      run.over = true;
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
      // A lost run's slot is the job's, which another worker may hold now: it lapses unless that one renews it.
      if (run.slotOf !== undefined && run.released !== 'lost') await releaseSlot(run.slotOf, id);
      settle();
    }
  };

  // The locks and slots of the runs here, renewed by this worker itself as well as by BullMQ: BullMQ forgets a
  // lock it renews by job id once a processor that moved its job elsewhere returns, and a job woken at once
  // (a parked task) may by then run here again, in another of this worker's slots.
  const renew = async (): Promise<void> => {
    const runs = [...live].filter(([, run]) => run.released === undefined && !run.over);
    const held = runs.flatMap(([id, run]) => (run.slotOf === undefined ? [] : [[run.slotOf, id] as const]));
    const lockOf = async ([id, run]: [string, LiveRun]): Promise<void> => {
      const renewed = await within(run.job.extendLock(run.token, setup.lockDurationMs), -1);
      if (renewed !== 0 || run.released !== undefined || run.over || live.get(id) !== run) return;
      log.warning(`Task ${id}: this worker lost its lock on it (another worker may take it up), so its run here stopped`);
      release(id, run, 'lost');
    };
    await Promise.all([within(setup.turns.renew(held), undefined), ...runs.map(lockOf)]);
  };
  const renewal = setInterval(() => void renew(), setup.lockDurationMs / 2);
  renewal.unref();

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
      // The run that stalled held its principal's slot, if capped: freed now rather than when it lapses.
      const principal = principalOf(job.data);
      if (principal !== undefined) void releaseSlot(principal, job.id);
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
      clearInterval(renewal);
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
        const closed = worker.close().then(
          () => true,
          (error: unknown) => (log.failed(error), true),
        );
        const late = new Promise<false>((resolve) => setTimeout(resolve, setup.commandTimeoutMs, false).unref());
        if (!(await Promise.race([closed, late])))
          log.warning(`The task queue's worker did not finish closing within ${setup.commandTimeoutMs} ms: Redis went away meanwhile`);
        return;
      }
      await worker.close(true).catch((error: unknown) => log.failed(error));
    },
  };
}
