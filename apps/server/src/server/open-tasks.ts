import {
  KlymError,
  createSessionPool,
  createTaskService,
  openTaskBackend,
  type SessionPool,
  type TaskService,
  type TaskEvent,
  type TaskRefusal,
  type TaskStore,
  type UpstreamCall,
  type UpstreamLogEntry,
} from '@klym/core';
import { createThreadRunner, type ThreadRunner } from '@klym/core/engine';
import { createRedactor } from '@klym/core/server';
import { THREAD_TRACING_SETUP } from '../telemetry/tracing-env.ts';
import { serverSecrets, type ResolvedServerOptions } from './server-options.ts';

/** The task service the server mounts, with what it opened for it. */
export interface OpenedTasks {
  readonly service: TaskService;
  /** The store the service keeps its tasks in (for views across principals, such as the dashboard's admin's). */
  readonly store: TaskStore;
  /** Closes the task service (grace period, then `shutdown`), then the pool and the store if they were opened here. Idempotent. */
  close(): Promise<void>;
}

/** What watches the tasks as they run (the server's metrics). */
export interface TaskObservers {
  /** Every upstream tool call once it ended, on the main thread's pool and the runner thread's (not on a `pool` passed in). */
  readonly onCall?: (call: UpstreamCall) => void;
  /** The task service's lifecycle events, from the first. */
  readonly onEvent?: (event: TaskEvent) => void;
  /** Each start refused over a limit (a principal's quota, the queue's bound), beside a `tasks.onRefuse` of the options'. */
  readonly onRefuse?: (refusal: TaskRefusal) => void;
}

/**
 * Opens what the server's tasks need, in this order: the task backend (`tasks.store`: a store given as it
 * is, or `openTaskBackend` of its spec), the pool (unless `options.pool` is given), the runner threads
 * (`tasks.runner: 'thread'`, `tasks.runnerThreads` of them), then core's task service over them, given `options.tasks` as it is. Whatever
 * it opened is closed in reverse order by `close()` (so the runner thread after the task service has ended
 * its runs), or at once if a later step fails.
 *
 * @throws {KlymError} `CONFIG_INVALID` for an options error; `STORE_UNAVAILABLE` naming the store's file or Redis and why it cannot be opened.
 */
export async function openTasks(options: ResolvedServerOptions, observers: TaskObservers = {}): Promise<OpenedTasks> {
  const { store: spec = 'memory', artifactLimits, sharedQueue, runner: where, runnerThreads, runnerNiceness, ...tasks } = options.tasks;
  const opened: (() => Promise<void>)[] = [];
  const closeOpened = async (): Promise<void> => {
    const failures: unknown[] = [];
    for (const close of opened.splice(0).toReversed()) await close().catch((error: unknown) => void failures.push(error));
    if (failures.length > 0) throw new AggregateError(failures, 'Klym could not close everything its tasks used');
  };
  try {
    let store: TaskStore;
    let { queue } = tasks;
    if (typeof spec === 'string') {
      const backend = await openTaskBackend(spec, {
        ...(tasks.log === undefined ? {} : { log: tasks.log }),
        ...(artifactLimits === undefined ? {} : { artifacts: artifactLimits }),
        ...(sharedQueue === undefined ? {} : { sharedQueue }),
        onQueueLog: (line, level) => options.log(line, level),
      });
      opened.push(() => backend.close());
      // A Redis store says what its server's settings put at risk (no append-only file, eviction).
      for (const warning of backend.warnings) options.log(`klym: ${warning}`, 'warning');
      store = backend.store;
      queue ??= backend.queue;
    } else {
      store = spec;
    }
    let pool: SessionPool | undefined = options.pool;
    if (pool === undefined) {
      const own = await createSessionPool({
        upstreams: options.upstreams ?? {},
        onLog: upstreamLog(options),
        ...(observers.onCall === undefined ? {} : { onCall: observers.onCall }),
      });
      opened.push(() => own.close());
      pool = own;
    }
    let { run } = tasks;
    // A front (no task runs here: its workers run them) needs no runner thread.
    if (where === 'thread' && tasks.maxConcurrent !== 0) {
      const runner = createThreadRunner({
        upstreams: threadUpstreams(options),
        ...(runnerThreads === undefined ? {} : { threads: runnerThreads }),
        ...(runnerNiceness === undefined ? {} : { niceness: runnerNiceness }),
        onLog: upstreamLog(options),
        ...(observers.onCall === undefined ? {} : { onCall: observers.onCall }),
        // The thread's runs make their spans through an SDK of its own, started from the same environment.
        ...(tasks.tracing === undefined ? {} : { setup: THREAD_TRACING_SETUP }),
      });
      opened.push(() => runner.close());
      if (runner.threadsCappedBy !== undefined) options.log(threadsCappedWarning(runner.threads, runner.threadsCappedBy), 'warning');
      run = runner;
    }
    const service = createTaskService({
      ...tasks,
      pool,
      store,
      ...(queue === undefined ? {} : { queue }),
      ...(run === undefined ? {} : { run }),
      ...(observers.onEvent === undefined ? {} : { onEvent: observers.onEvent }),
      ...(observers.onRefuse === undefined ? {} : { onRefuse: bothRefusals(tasks.onRefuse, observers.onRefuse) }),
      // Tokens name principals; a log, an error or a result must never quote one.
      secrets: serverSecrets(options),
    });
    let closing: Promise<void> | undefined;
    return {
      service,
      store,
      close() {
        closing ??= (async () => {
          try {
            await service.close();
          } finally {
            await closeOpened();
          }
        })();
        return closing;
      },
    };
  } catch (error) {
    await closeOpened().catch(() => {});
    throw error;
  }
}

/**
 * The upstreams the runner thread opens its own pool over: the server's. A pool passed in, or a `run` of
 * the caller's own, leaves the thread nothing to run on, or nothing to run.
 * @throws {KlymError} `CONFIG_INVALID` naming the option that rules the thread out.
 */
function threadUpstreams(options: ResolvedServerOptions): NonNullable<ResolvedServerOptions['upstreams']> {
  if (options.tasks.run !== undefined)
    throw new KlymError('CONFIG_INVALID', "Expected either `tasks.run` or `tasks.runner: 'thread'`, got both: the thread runs core's own agent");
  if (options.pool !== undefined)
    throw new KlymError(
      'CONFIG_INVALID',
      "Expected `upstreams` with `tasks.runner: 'thread'`, got a `pool`: the thread opens its own pool, which cannot be passed across",
    );
  return options.upstreams ?? {};
}

/** What `klym serve` says when an upstream's `pool.max` allowed fewer runner threads than `tasks.runnerThreads` asked for. */
function threadsCappedWarning(threads: number, { upstream, max, requested }: NonNullable<ThreadRunner['threadsCappedBy']>): string {
  return (
    `klym: tasks run on ${plural(threads, 'runner thread')}, not ${requested}: upstream "${upstream}" allows ${plural(max, 'session')} at a time ` +
    `(pool.max ${max}); raise its pool.max to run tasks on more threads`
  );
}

/** `1 session`, `3 sessions`. */
function plural(count: number, noun: string): string {
  return `${count} ${noun}${count === 1 ? '' : 's'}`;
}

/** Tells `observer` of a refusal, after `given` (the options' own listener) if there is one. */
function bothRefusals(given: ((refusal: TaskRefusal) => void) | undefined, observer: (refusal: TaskRefusal) => void): (refusal: TaskRefusal) => void {
  if (given === undefined) return observer;
  return (refusal) => {
    try {
      given(refusal);
    } finally {
      observer(refusal);
    }
  };
}

/** What upstreams log, to the server's log as `[upstream level] message` at its level, secrets scrubbed. */
function upstreamLog(options: ResolvedServerOptions): (entry: UpstreamLogEntry) => void {
  const scrub = createRedactor(serverSecrets(options)).text;
  return (entry) => options.log(scrub(`[${entry.upstream} ${entry.level}] ${entry.message.replace(/\s*\n\s*/g, ' ')}`), entry.level);
}
