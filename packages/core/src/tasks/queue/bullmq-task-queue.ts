import { randomUUID } from 'node:crypto';
import { PRIORITY_LIMIT, Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { TASK_QUEUE_DEFAULTS } from '../../defaults.ts';
import { KlymError } from '../../errors.ts';
import { createRedactor } from '../../redact.ts';
import { bullmqLayoutOf, type BullmqLayout } from './bullmq-layout.ts';
import { startBullmqWorker, type BullmqWorker } from './bullmq-worker.ts';
import { createPrincipalTurns, principalOf, PRINCIPAL_TURN_SCRIPTS } from './principal-turns.ts';
import { createQueueLog, isConnectionFailure, messageOf, type QueueLogListener } from './queue-log.ts';
import { redisTargetOf } from '../store/redis/redis-url.ts';
import type { AnnouncedEvent, TaskPlacement, TaskQueue } from './task-queue.ts';
import { positiveInteger } from '../../internal/positive.ts';

const ANNOUNCED = new Set<AnnouncedEvent>(['task-start', 'task-resume', 'task-end']);

/** The priority of a task queued without a placement: between rank 1's and rank 2's (see {@link priorityOf}). */
const UNPLACED_PRIORITY = 2;

/**
 * A placement's rank as a BullMQ priority (1 starts first; ties in arrival order): rank r is 2r − 1, so that a
 * task queued without a placement (priority 2) waits behind every rank-1 task and ahead of every rank-2 one,
 * as `TaskQueue.add` says, and such tasks keep their arrival order among themselves. Ranks past BullMQ's
 * highest priority (2^21 − 1, rank 1,048,576) share it, in arrival order.
 */
function priorityOf(placement: TaskPlacement | undefined): number {
  if (placement === undefined) return UNPLACED_PRIORITY;
  const rank = positiveInteger('placement.rank', placement.rank, 'INVALID_ARGUMENT');
  return Math.min(2 * rank - 1, PRIORITY_LIMIT);
}

/** Options of {@link createBullmqTaskQueue}. */
export interface BullmqTaskQueueOptions {
  /** `redis://[user:password@]host:port/db`, or `rediss://…` for TLS. Only `host:port/db` ever shows in a message. */
  readonly url: string;
  /** Prefix of BullMQ's keys. @default 'klym:bull' */
  readonly prefix?: string;
  /** The queue's name (no `:`): processes that share it serve the same tasks. @default 'tasks' */
  readonly name?: string;
  /**
   * How long a worker's lock on a task it runs lasts unless renewed; it is renewed every half of it. With
   * `stalledIntervalMs`, it bounds how soon a worker that died has its task taken over: within about
   * `lockDurationMs` + 2 × `stalledIntervalMs` (50 s by default). @default 30_000
   */
  readonly lockDurationMs?: number;
  /**
   * How often workers look for tasks whose worker stopped renewing its lock; BullMQ finds a stalled job in
   * two checks (one marks it, the next moves it back). @default 10_000
   */
  readonly stalledIntervalMs?: number;
  /**
   * How many times a task may be taken over from a worker that stopped renewing its lock (it died, or its
   * process was stuck past `lockDurationMs`). Once more, it ends as `error` with `TASK_INTERRUPTED`: a task
   * that kills every worker it runs on is not handed on for ever. @default 1
   */
  readonly maxStalledCount?: number;
  /** How long the first connection may take before the queue refuses to open (`STORE_UNAVAILABLE`). @default 10_000 */
  readonly connectTimeoutMs?: number;
  /** How long one call to Redis may take before it fails (`STORE_UNAVAILABLE`). @default 5_000 */
  readonly commandTimeoutMs?: number;
  /** Receives what the queue has to say: Redis lost and reached again (once each), a lock lost, BullMQ's errors. Never the URL's password. */
  readonly onLog?: QueueLogListener;
}

/** A {@link TaskQueue} on BullMQ, shared by every process that opens it on the same Redis and name. */
export interface BullmqTaskQueue extends TaskQueue, AsyncDisposable {
  readonly shared: true;
  /** `host:port/db` of its Redis: never the password, for messages and health reports. */
  readonly where: string;
}

/**
 * A task queue any number of Klym processes share on one Redis, with BullMQ. Every process adds tasks to
 * it and cancels them (a *front*); a process whose task manager has `maxConcurrent` above 0 also runs them
 * (a *worker*). A job carries only its task's id, which is its job id, and its principal, so a task is one
 * job; the task itself is in the store the processes share.
 *
 * - Fair turns: a task's rank is its job's BullMQ priority (see {@link priorityOf}), so every worker takes a
 *   principal's first waiting task before any principal's second, and a principal's own tasks in the order
 *   they came (an older one takes the turn of a newer one that came up first). `position(id)` says how many
 *   waiting tasks start before one, from any process.
 * - A principal at its cap (the consumer's `runningLimit`), counted across every worker, has its task parked
 *   in BullMQ's delayed set until one of its runs ends and wakes it; others start meanwhile.
 * - A worker takes a job, and the task runs, resumes from its checkpoint, or is dropped, by its status.
 * - A task added while a run still holds its job (answered as the run that asked was ending) is added
 *   again once that run lets the job go: an add is never lost to a job about to complete.
 * - A cancel made anywhere reaches the run at once: every worker listens on a Redis channel.
 * - A worker that died stops renewing its lock, and its task is taken over within about `lockDurationMs` +
 *   2 × `stalledIntervalMs`; a worker whose lock was lost stops its run. A task never runs on two workers.
 * - The manager's `close({ graceMs })` takes no new tasks, lets runs end within the grace, then hands the
 *   rest back `running` with their checkpoints, and another worker resumes them at once.
 * - Redis down: adding a task fails at once with `STORE_UNAVAILABLE`, nothing throws elsewhere, and every
 *   connection comes back by itself.
 *
 * The task manager it is given to opens it and closes it.
 *
 * @throws {KlymError} `CONFIG_INVALID` for a bad URL or option; `STORE_UNAVAILABLE` when Redis cannot be
 * reached within `connectTimeoutMs` (the message names `host:port/db`, never the password); `CONFIG_INVALID`
 * when the installed BullMQ is not the major version whose keys Klym reads (6).
 * @example
 * ```ts
 * const store = await createRedisTaskStore({ url })
 * const queue = await createBullmqTaskQueue({ url })
 * const tasks = createTaskManager({ pool, store, queue, maxConcurrent: 4 }) // 0 for a front
 * ```
 */
export async function createBullmqTaskQueue(options: BullmqTaskQueueOptions): Promise<BullmqTaskQueue> {
  const settings = { ...TASK_QUEUE_DEFAULTS, ...definedOnly(options) };
  for (const name of ['lockDurationMs', 'stalledIntervalMs', 'connectTimeoutMs', 'commandTimeoutMs'] as const) positive(name, settings[name]);
  if (!Number.isInteger(settings.maxStalledCount) || settings.maxStalledCount < 0) {
    throw new KlymError('CONFIG_INVALID', `Expected \`maxStalledCount\` to be an integer of at least 0, got ${settings.maxStalledCount}`);
  }
  if (settings.name === '' || settings.name.includes(':'))
    throw new KlymError('CONFIG_INVALID', `Expected the queue's \`name\` to be a non-empty name without ":", got "${settings.name}"`);
  const target = redisTargetOf(options.url);
  const { where } = target;
  const redact = createRedactor(target.secrets);
  const log = createQueueLog(where, redact, options.onLog);
  // A connection lost is tried again soon and for ever: a worker is back within 2 s of its Redis.
  const connection = {
    ...target.options,
    connectTimeout: settings.connectTimeoutMs,
    retryStrategy: (attempt: number): number => Math.min(attempt * 200, 2_000),
  };
  // The front's connection fails fast while Redis is down, so that a start answers instead of waiting.
  const producer = new Redis({
    ...connection,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    commandTimeout: settings.commandTimeoutMs,
    scripts: PRINCIPAL_TURN_SCRIPTS,
  });
  producer.on('error', (error: unknown) => log.failed(error));
  producer.on('ready', () => log.ready());
  let letGo = false;
  producer.on('close', () => letGo || log.lost());
  const queue = new Queue(settings.name, { connection: producer, prefix: settings.prefix });
  queue.on('error', (error) => log.failed(error));
  let layout: BullmqLayout;
  try {
    layout = bullmqLayoutOf(queue);
  } catch (error) {
    letGo = true;
    await queue.close().catch(() => {});
    producer.disconnect();
    throw error;
  }
  // A principal's slots lapse as its runs' locks do, once their worker stops renewing them.
  const turns = createPrincipalTurns(producer, layout, settings.lockDurationMs);
  const cancelChannel = `${settings.prefix}:${settings.name}:cancel`;
  const eventsChannel = `${settings.prefix}:${settings.name}:events`;
  // Who announces an event, so that a process does not hear its own.
  const instance = randomUUID();

  const reached = await Promise.race([
    queue.waitUntilReady().then(() => true),
    new Promise<false>((resolve) => setTimeout(resolve, settings.connectTimeoutMs, false).unref()),
  ]).catch(() => false);
  if (!reached) {
    letGo = true;
    await queue.close().catch(() => {});
    producer.disconnect();
    throw new KlymError(
      'STORE_UNAVAILABLE',
      redact.text(
        `The task queue could not reach Redis at ${where} within ${settings.connectTimeoutMs} ms${log.outage === undefined ? '' : ` (${log.outage})`}`,
      ),
    );
  }

  const unavailable = (action: string, error: unknown): KlymError => {
    const why =
      producer.status === 'ready' && !isConnectionFailure(error)
        ? `failed: ${messageOf(error)}`
        : `is unreachable (${log.outage ?? messageOf(error)}); Klym reconnects by itself`;
    return new KlymError('STORE_UNAVAILABLE', redact.text(`The task queue could not ${action}: Redis at ${where} ${why}`));
  };

  // Its own job id: adding a task whose job is queued or running is a no-op in BullMQ, and the job keeps its
  // priority (a task resumed after a restart or a takeover keeps its place).
  const enqueue = async (id: string, placement: TaskPlacement | undefined, priority: number): Promise<void> => {
    await queue.add('task', placement === undefined ? {} : { principal: placement.principal }, {
      jobId: id,
      priority,
      removeOnComplete: true,
      removeOnFail: true,
    });
    if (placement !== undefined) await turns.queued(placement.principal, id);
  };

  // Tasks added while their job was held by a run (a question answered while the run that asked was ending:
  // that run may have looked at the task before the answer came, and then completes its job, which BullMQ
  // removes). BullMQ cannot queue a job again under an id still held (its `keepLastIfActive` deduplication
  // recreates the job before the finished one is removed, so it needs a job id per run), so each is watched
  // until its job is let go, then added again: a no-op if the run left the job queued (it saw the answer),
  // a new job if it completed it. Watched no longer than a takeover takes: a job still held then is a run
  // that took the task up, or is found stalled and queued again by BullMQ.
  const watches = new Map<string, NodeJS.Timeout>();
  const heldForAtMost = settings.lockDurationMs + 2 * settings.stalledIntervalMs;
  const queueWhenLetGo = (id: string, placement: TaskPlacement | undefined, priority: number): void => {
    if (watches.has(id) || closing !== undefined) return;
    const until = Date.now() + heldForAtMost;
    const look = async (delayMs: number): Promise<void> => {
      watches.delete(id);
      try {
        if (closing !== undefined) return;
        if ((await queue.getJobState(id)) === 'active') {
          if (Date.now() < until && closing === undefined) watches.set(id, setTimeout(() => void look(Math.min(delayMs * 2, 1_000)), delayMs).unref());
          return;
        }
        await enqueue(id, placement, priority);
      } catch (error) {
        // Closing: the queue is let go under it; the task is `pending`, and the next process to start queues it.
        if (closing !== undefined) return;
        log.warning(
          `${unavailable(`queue task ${id} again once the run that held its job let it go`, error).message}. It is taken up when a Klym process sharing the queue next starts`,
        );
      }
    };
    watches.set(id, setTimeout(() => void look(50), 25).unref());
  };

  let worker: BullmqWorker | undefined;
  let subscriber: Redis | undefined;
  let opened = false;
  let closing: Promise<void> | undefined;
  const bullmq: BullmqTaskQueue = {
    shared: true,
    where,
    open(consumer) {
      if (opened) throw new KlymError('CONFIG_INVALID', 'This task queue already serves a task manager; give each manager a queue of its own');
      opened = true;
      if (consumer.concurrency > 0) {
        worker = startBullmqWorker({
          name: settings.name,
          prefix: settings.prefix,
          connection: { ...connection, maxRetriesPerRequest: null },
          consumer,
          jobs: queue,
          turns,
          lockDurationMs: settings.lockDurationMs,
          stalledIntervalMs: settings.stalledIntervalMs,
          maxStalledCount: settings.maxStalledCount,
          commandTimeoutMs: settings.commandTimeoutMs,
          reachable: () =>
            producer.ping().then(
              () => true,
              () => false,
            ),
          log,
        });
      }
      // Every process hears of cancels (for its runs) and of tasks started, resumed and ended elsewhere (for its listeners).
      // Subscribed by the 'ready' handler below only: ioredis's own resubscribe on a reconnect (`autoResubscribe`,
      // ioredis 5.11) is a SUBSCRIBE whose promise nobody handles, so a close that lands between a reconnect's
      // ready check and Redis's answer left it rejected unhandled ("Connection is closed.").
      const listener = (subscriber = new Redis({ ...connection, maxRetriesPerRequest: null, autoResubscribe: false }));
      listener.on('message', (channel: string, message: string) => {
        if (channel === cancelChannel) worker?.abort(message);
        const [from, type, id] = message.split(' ', 3);
        if (channel === eventsChannel && from !== instance && id !== undefined && ANNOUNCED.has(type as AnnouncedEvent))
          consumer.heardElsewhere(type as AnnouncedEvent, id);
      });
      listener.on('error', (error: unknown) => log.failed(error));
      // On every (re)connect: subscribed (again), then a cancel sent while the channel was down is found in the
      // store instead. Not once the queue is closing: the connection is let go, and its SUBSCRIBE would only fail.
      listener.on('ready', () => {
        log.ready();
        if (closing !== undefined) return;
        void listener
          .subscribe(cancelChannel, eventsChannel)
          .then(() => worker?.recheck())
          .catch((error: unknown) => log.failed(error));
      });
    },
    async add(id, placement) {
      const priority = priorityOf(placement);
      let held: boolean;
      try {
        // Looked at as it is added (both sent at once, the look first): adding a task whose job a run still holds
        // (`active`) is a no-op in BullMQ.
        const [state] = await Promise.all([queue.getJobState(id), enqueue(id, placement, priority)]);
        held = state === 'active';
      } catch (error) {
        throw unavailable(`queue task ${id}`, error);
      }
      if (held) queueWhenLetGo(id, placement, priority);
    },
    async position(id) {
      try {
        const job = await queue.getJob(id);
        return job === undefined ? undefined : await turns.position(principalOf(job.data), id, job.priority);
      } catch (error) {
        throw unavailable(`tell the place of task ${id}`, error);
      }
    },
    async cancel(id) {
      worker?.abort(id);
      try {
        // Every worker hears it, and the one running the task stops it; a job still waiting is removed.
        await producer.publish(cancelChannel, id);
        const principal = principalOf((await queue.getJob(id))?.data);
        await queue.remove(id);
        if (principal !== undefined) await turns.forget(principal, id);
      } catch (error) {
        log.warning(
          `${unavailable(`tell the workers that task ${id} was cancelled`, error).message}. Its run stops once its worker is back on Redis and finds it cancelled`,
        );
      }
    },
    async waiting() {
      try {
        // Prioritized: every placed task; delayed: those whose principal is at its cap, or whose end is retried.
        return await queue.getJobCountByTypes('waiting', 'prioritized', 'delayed');
      } catch (error) {
        throw unavailable('count the tasks waiting', error);
      }
    },
    hasFreeSlot: () => false,
    announce(type, id) {
      // A notification: one lost while Redis is away costs a listener its news, not the task its end.
      void producer.publish(eventsChannel, `${instance} ${type} ${id}`).catch(() => {});
    },
    close({ graceMs }) {
      closing ??= (async () => {
        for (const timer of watches.values()) clearTimeout(timer);
        watches.clear();
        await worker?.close(graceMs);
        subscriber?.disconnect();
        letGo = true;
        await queue.close().catch(() => {});
        // QUIT lets what was sent finish; without Redis there is nothing to finish.
        if (producer.status === 'ready') await producer.quit().catch(() => producer.disconnect());
        else producer.disconnect();
      })();
      return closing;
    },
    [Symbol.asyncDispose]: () => bullmq.close({ graceMs: 0 }),
  };
  return bullmq;
}

function positive(name: string, value: number): void {
  if (!Number.isFinite(value) || value <= 0) throw new KlymError('CONFIG_INVALID', `Expected \`${name}\` to be a positive number, got ${value}`);
}

/** The options given, without the ones given as `undefined` (which must not hide a default). */
function definedOnly<T extends object>(options: T): Partial<T> {
  return Object.fromEntries(Object.entries(options).filter(([, value]) => value !== undefined)) as Partial<T>;
}
