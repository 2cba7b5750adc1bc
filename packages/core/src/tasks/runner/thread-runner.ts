import { availableParallelism } from 'node:os';
import type { AgentRunResult, RunAgentOptions } from '../../agent/types.ts';
import { outsideBudget, type BudgetHit } from '../../agent/budget.ts';
import { KlymError } from '../../errors.ts';
import type { UpstreamConfig } from '../../pool/upstream-config.ts';
import type { UpstreamLogEntry } from '../../pool/upstream-session.ts';
import type { UpstreamCall } from '../../pool/upstream-status.ts';
import type { PortableRunOptions, RunnerThreadData, ToRunnerThread } from './runner-messages.ts';
import type { AgentRunner } from '../../agent/types.ts';
import { TASK_DEFAULTS } from '../../defaults.ts';
import { portableRunOptions, portableUpstreams, threadCount, threadShares } from './portable-options.ts';
import { closeRunnerThread, startRunnerThread, type PendingRun, type RunnerThread } from './runner-thread-handle.ts';

/** Options of {@link createThreadRunner}. */
export interface ThreadRunnerOptions {
  /**
   * The upstreams each thread's own session pool is opened over, as `createSessionPool` takes them: HTTP
   * and stdio upstreams (an upstream given as a `connect()` function cannot cross a thread). An upstream's
   * `pool.max` is the runner's total: each thread's pool gets its share (`max` divided by the threads, the
   * remainder to the first threads), and `pool.min` at most that share. Since each thread needs a session
   * of each upstream, the runner starts no more threads than the smallest `pool.max` (a stdio upstream,
   * `pool.max` 1 by default, means one thread). The main thread's own pool is apart from this total.
   */
  readonly upstreams: Readonly<Record<string, UpstreamConfig>>;
  /**
   * How many runner threads the runs are spread over, each with its own session pool: a run goes to the
   * thread with the fewest runs under way (an idle one that is running before a new one is started), so
   * a run that keeps its thread busy (a tokenizer at work over a big artifact) holds up only the runs
   * beside it on that thread. The first thread starts with the runner, the others when a run finds every
   * running thread busy. At most the smallest `pool.max` among `upstreams` are started (see `upstreams`;
   * the runner's `threads` says how many, and `threadsCappedBy` which upstream allowed no more).
   * @default the machine's cores less one (`os.availableParallelism() - 1`), at least 1
   */
  readonly threads?: number;
  /** How Klym introduces itself in `initialize`. @default { name: 'klym', version: '0.1.0' } */
  readonly clientInfo?: { readonly name: string; readonly version: string };
  /** Receives what the threads' upstreams log, as `createSessionPool`'s `onLog` does. */
  readonly onLog?: (entry: UpstreamLogEntry) => void;
  /**
   * Receives every tool call of the threads' pools once it has ended, as `createSessionPool`'s `onCall`
   * does: they cross with the runs' events, a turn's worth at a time.
   */
  readonly onCall?: (call: UpstreamCall) => void;
  /** On `close()`, how long runs' calls may take to end before each thread's pool aborts them. @default 5_000 */
  readonly drainTimeoutMs?: number;
  /**
   * How many steps below the process's scheduling priority each thread runs (its nice value, 0-19; Linux,
   * where a thread has its own): when the cores are short, the main thread — the front that answers
   * status polls — runs first, and the runs take what it leaves. 0 keeps the process's priority. @default 10
   */
  readonly niceness?: number;
  /**
   * A module each thread imports before its first run, for what is per thread: `klym serve` registers an
   * OpenTelemetry SDK there when tracing is on, since the thread has globals of its own (a run's `tracing`
   * crosses without its `tracer`, and the thread's registered provider makes the spans). If the module
   * exports `close()`, the thread awaits it when it closes (to flush what it buffered). A module that
   * fails to load fails each of the thread's runs with its error. @default none
   */
  readonly setup?: string | URL;
}

/** A runner of tasks' agents on a worker thread of its own: an {@link AgentRunner} that must be closed. */
export type ThreadRunner = AgentRunner &
  AsyncDisposable & {
    /** Always true: the events come from `runAgent` on the thread, redacted there. */
    readonly redactsEvents: true;
    /** How many threads the runs are spread over: `options.threads`, or fewer if an upstream's `pool.max` allows fewer. */
    readonly threads: number;
    /**
     * Set when an upstream's `pool.max` allowed fewer threads than were asked for: the upstream (the one with
     * the smallest `max`), its `max`, and the threads `requested` (`options.threads` or its default).
     */
    readonly threadsCappedBy?: { readonly upstream: string; readonly max: number; readonly requested: number };
    /** Ends the runs still under way (their scopes close), closes the threads' pools, then ends the threads. Idempotent. */
    close(): Promise<void>;
  };

/**
 * Runs tasks' agents (`runAgent`) on worker threads, so that the thread which serves requests never
 * waits behind a run's model streams, upstream calls and redaction, and a run's synchronous work holds
 * up only the runs on its own thread. Runs are spread over `threads` threads, each to the least busy, but
 * no more threads than the smallest `pool.max` among `upstreams` allows (each `pool.max` stays a total).
 * Each thread opens its own session pool over `upstreams` (its share of each `pool.max`) for its whole
 * life and a scope of it per run (named as the run's own `scope`); the run's `pool` and `scope` are not
 * used. Events and checkpoints reach the run's `onEvent` and `onCheckpoint` in order; a call is sent only
 * once its before-call checkpoint was stored. Aborting a run's `signal` aborts it on its thread, its
 * model request and calls included.
 *
 * If a thread dies (an uncaught exception, `process.exit`, out of memory), its runs — and only its —
 * reject with `INTERNAL` ("The runner thread ended while the run was under way (it exited with code 1);
 * …"), the other threads' runs go on, and a later run starts a fresh thread in its place; the process
 * goes on. A promise on a thread that rejects unhandled is re-raised on the main thread, as it would have
 * been had the run been inline.
 *
 * @throws {KlymError} `CONFIG_INVALID` for an upstream given as a `connect()` function (naming it) or
 * otherwise invalid, and for `threads` that is not a positive integer. A run rejects with `CONFIG_INVALID` when its `model` is a model object (only names
 * cross the thread) or an option cannot be copied to it, and with `SHUTTING_DOWN` after `close()`.
 * @example
 * ```ts
 * await using runner = createThreadRunner({ upstreams: { grynya: { url: 'http://127.0.0.1:8000/sse' } } })
 * const tasks = createTaskManager({ pool, run: runner })
 * ```
 */
export function createThreadRunner(options: ThreadRunnerOptions): ThreadRunner {
  const requested = threadsOf(options.threads);
  const upstreams = portableUpstreams(options.upstreams);
  const { count, cappedBy } = threadCount(upstreams, requested);
  const common: Omit<RunnerThreadData, 'upstreams'> = {
    ...(options.clientInfo === undefined ? {} : { clientInfo: options.clientInfo }),
    // The AI SDK prints its warnings unless this global says not to; the thread has globals of its own.
    ...((globalThis as { AI_SDK_LOG_WARNINGS?: unknown }).AI_SDK_LOG_WARNINGS === false ? { aiSdkLogWarnings: false as const } : {}),
    niceness: nicenessOf(options.niceness ?? TASK_DEFAULTS.runnerNiceness),
    ...(options.setup === undefined ? {} : { setup: String(options.setup) }),
    observeCalls: options.onCall !== undefined,
  };
  const data: RunnerThreadData[] = threadShares(upstreams, count).map((share) => ({ ...common, upstreams: share }));
  const drainTimeoutMs = options.drainTimeoutMs ?? TASK_DEFAULTS.runnerDrainTimeoutMs;
  const threads: (RunnerThread | undefined)[] = Array.from({ length: count }, () => undefined);
  let nextId = 0;
  let closing: Promise<void> | undefined;
  const hooks = {
    onLog: options.onLog,
    onCall: options.onCall,
    closing: () => closing !== undefined,
    onExit: (thread: RunnerThread) => {
      if (threads[thread.index] === thread) threads[thread.index] = undefined;
    },
  };
  const start = (index: number): RunnerThread => (threads[index] = startRunnerThread(index, data[index] as RunnerThreadData, hooks));

  /** The least busy thread: an idle running one, else a new one while there is room, else the one with the fewest runs. */
  const pick = (): RunnerThread => {
    let least: RunnerThread | undefined;
    for (const thread of threads) {
      if (thread === undefined) continue;
      if (thread.runs.size === 0) return thread;
      if (least === undefined || thread.runs.size < least.runs.size) least = thread;
    }
    const free = threads.indexOf(undefined);
    return free !== -1 ? start(free) : (least as RunnerThread);
  };

  const run = (runOptions: RunAgentOptions): Promise<AgentRunResult> => {
    if (closing !== undefined) return Promise.reject(new KlymError('SHUTTING_DOWN', 'The runner thread is closed; the run was not started'));
    let portable: PortableRunOptions;
    try {
      portable = portableRunOptions(runOptions);
    } catch (error) {
      return Promise.reject(error);
    }
    const thread = pick();
    const id = ++nextId;
    return new Promise<AgentRunResult>((resolve, reject) => {
      const { signal, budgetSignal } = runOptions;
      const onAbort = (): void => thread.send({ type: 'abort', id }, true);
      const onBudget = (): void => thread.send({ type: 'budget', id, hit: outsideBudget(budgetSignal) as BudgetHit }, true);
      const unlisten = (): void => {
        signal?.removeEventListener('abort', onAbort);
        budgetSignal?.removeEventListener('abort', onBudget);
      };
      const pending: PendingRun = {
        options: runOptions,
        resolve: (result) => {
          unlisten();
          resolve(result);
        },
        reject: (error) => {
          unlisten();
          reject(error);
        },
        stored: Promise.resolve(),
        messages: runOptions.resume?.messages ?? [],
      };
      try {
        // Not batched: an option the structured clone refuses is the caller's error, and says so now.
        // oxlint-disable-next-line unicorn/require-post-message-target-origin -- a Worker's postMessage has no target origin
        thread.worker.postMessage([{ type: 'run', id, options: portable } satisfies ToRunnerThread]);
      } catch (error) {
        reject(
          new KlymError('CONFIG_INVALID', `The run's options cannot be sent to the runner thread: ${error instanceof Error ? error.message : String(error)}`, {
            cause: error,
          }),
        );
        return;
      }
      thread.runs.set(id, pending);
      thread.worker.ref();
      if (signal?.aborted) onAbort();
      else signal?.addEventListener('abort', onAbort, { once: true });
      if (budgetSignal?.aborted) onBudget();
      else budgetSignal?.addEventListener('abort', onBudget, { once: true });
    });
  };

  const close = (): Promise<void> => {
    closing ??= (async () => {
      const running = threads.filter((thread) => thread !== undefined);
      threads.fill(undefined);
      const failures = (await Promise.allSettled(running.map((thread) => closeRunnerThread(thread, drainTimeoutMs)))).flatMap((outcome) =>
        outcome.status === 'rejected' ? [outcome.reason as unknown] : [],
      );
      if (failures.length > 0) throw new AggregateError(failures, 'Klym could not close every runner thread');
    })();
    return closing;
  };

  // Started at once, so that its pool is connected by the first run; after a crash, by the next run.
  start(0);
  return Object.assign(run, {
    redactsEvents: true as const,
    threads: count,
    ...(cappedBy === undefined ? {} : { threadsCappedBy: { ...cappedBy, requested } }),
    close,
    [Symbol.asyncDispose]: close,
  });
}

/** The machine's cores less one, at least 1: the main thread keeps a core for the front. */
function defaultRunnerThreads(): number {
  return Math.max(1, availableParallelism() - 1);
}

function threadsOf(value: number | undefined): number {
  if (value === undefined) return defaultRunnerThreads();
  if (!Number.isInteger(value) || value < 1) throw new KlymError('CONFIG_INVALID', `Expected \`threads\` to be a positive integer, got ${String(value)}`);
  return value;
}

function nicenessOf(value: number): number {
  if (!Number.isInteger(value) || value < 0 || value > 19)
    throw new KlymError('CONFIG_INVALID', `Expected \`niceness\` to be an integer from 0 to 19, got ${String(value)}`);
  return value;
}
