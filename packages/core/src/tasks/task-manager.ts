import { randomBytes } from 'node:crypto';
import type { AgentRunResult, AgentUsage, RunAgentOptions } from '../agent/types.ts';
import { TASK_DEFAULTS } from '../defaults.ts';
import { runAgent } from '../agent/run-agent.ts';
import { isKlymError, KlymError } from '../errors.ts';
import { createRedactor, secretsOf } from '../redact.ts';
import type { SessionPool } from '../pool/session-pool.ts';
import type { TraceCarrier } from '../telemetry/trace-context.ts';
import type { TracingOptions } from '../telemetry/tracing.ts';
import { createMemoryTaskStore } from './store/memory-task-store.ts';
import { createInProcessTaskQueue } from './queue/in-process-queue.ts';
import type { TaskQueue } from './queue/task-queue.ts';
import type { PerPrincipalOptions, PrincipalUsage } from './admission/principal-quotas.ts';
import { createTaskAdmission } from './admission/task-admission.ts';
import { createTaskExecution, notResumed } from './task-execution.ts';
import type { BoundedLogOptions, TaskLogPage } from './store/task-log.ts';
import type { TaskRunDefaults } from './runner/task-run.ts';
import { isTerminal, type TaskListPage, type TaskPageRequest, type TaskRecord, type TaskRequest, type TaskStatus, type TaskStore } from './task-types.ts';
import type { WriteBackOptions } from './runner/write-back.ts';
import type { PushTarget } from '../webhooks/push-types.ts';
import { createArtifactStore, type ArtifactSlice, type ArtifactStore, type ReadRequest } from '../artifacts/artifact-store.ts';
import type { ArtifactInfo, StoredArtifact } from '../artifacts/artifact-types.ts';
import { taskArtifacts } from './runner/task-artifacts.ts';
import { createTaskQueries, type TaskQueriesOptions } from './runner/task-queries.ts';
import type { QueryAnswer } from '../artifacts/artifact-query.ts';

/** What runs a task's agent: `runAgent` of `@klym/core`, or a stand-in with its contract. */
export type AgentRunner = ((options: RunAgentOptions) => Promise<AgentRunResult>) & {
  /**
   * The runner's events are already redacted with the run's `secrets` and provider keys, as `runAgent`'s
   * are (`createThreadRunner`'s are: they come from `runAgent` on its thread). The task manager then logs
   * them as they come instead of redacting each a second time. @default false (true for `runAgent` itself)
   */
  readonly redactsEvents?: boolean;
};

/** Options of {@link createTaskManager}. */
export interface TaskManagerOptions {
  /**
   * The upstream sessions tasks run on. Not closed by the manager. Each task's run gets a scope of it
   * (`openScope(taskId)`), closed when the task ends however it ends: `task`-scoped upstreams give the
   * task a session of its own; a resumed task gets a fresh one.
   */
  readonly pool: SessionPool;
  /**
   * Where tasks are kept. Not closed by the manager. Tasks it holds `pending` or `running` (a process that
   * died) are taken up at once: see `resumeOnRestart`. @default an in-memory store with `log`
   */
  readonly store?: TaskStore;
  /** Bounds of each task's log, for the default store. @default { maxBytes: 262_144, maxEntryBytes: 4_096 } */
  readonly log?: BoundedLogOptions;
  /** Runs one task's agent. @default `runAgent` from `@klym/core` */
  readonly run?: AgentRunner;
  /**
   * Tasks running at once in this process; more wait as `pending`. On a shared `queue`, 0 makes this
   * process a front: it starts, reads and cancels tasks, and runs none. @default 4
   */
  readonly maxConcurrent?: number;
  /**
   * Tasks waiting as `pending` at most (on a shared `queue`, in all processes together); one more is
   * refused with `TASK_QUEUE_FULL`, so a caller cannot grow the queue without bound. @default 1_000
   */
  readonly maxQueued?: number;
  /**
   * Limits of each principal's tasks, and of some by name (`overrides`): `maxRunning` of its tasks run at once
   * (the rest wait their turn), `maxQueued` wait (one more start is refused with `QUOTA_EXCEEDED`), and spend per
   * day (`maxTokensPerDay`, `maxUsdPerDay`: counted in the store, so across restarts). Whatever the
   * limits, waiting tasks start in fair turns: a principal's first waiting task before any principal's second.
   * @default {} (no limit of a principal's own)
   */
  readonly perPrincipal?: PerPrincipalOptions;
  /**
   * Where started tasks wait, and which process runs them. The manager opens it and closes it with itself.
   * A shared one (`createBullmqTaskQueue` of `@klym/core/redis`, over a `store` every process shares) lets
   * any number of processes start, cancel and run one set of tasks.
   * @default an in-process queue: tasks run in this process, `maxConcurrent` at a time
   */
  readonly queue?: TaskQueue;
  /** Run time limit of one task, across restarts; it also caps the run's `budget.timeoutMs`. Hitting it is `error` with `TASK_TIMEOUT`. @default 1_800_000 */
  readonly taskTimeoutMs?: number;
  /** How long a finished task stays visible before it is evicted. @default 3_600_000 */
  readonly ttlMs?: number;
  /**
   * What happens to a task the store holds as `running` when the manager starts (its process died), or,
   * on a shared queue, when a worker takes up a task another one stopped running: resume it from its last
   * checkpoint (`true`), or end it as `error` with `TASK_INTERRUPTED`, its log intact. @default true
   */
  readonly resumeOnRestart?: boolean;
  /** Run options for every task. @default {} (runAgent's own defaults) */
  readonly defaults?: TaskRunDefaults;
  /** Writing results into the graph. @default { upstream: 'grynya', byDefault: false } */
  readonly writeBack?: WriteBackOptions;
  /** Strings never to show in logs, errors or results (API keys, tokens). Provider keys in `defaults` are added. @default [] */
  readonly secrets?: readonly string[];
  /** Receives task lifecycle events. */
  readonly onEvent?: (event: TaskEvent) => void;
  /** Hears of each start refused over a limit (for metrics): who, and which limit. */
  readonly onRefuse?: (refusal: TaskRefusal) => void;
  /**
   * Traces tasks with OpenTelemetry: each run of a task is a `klym task` span — a child of the trace context
   * its start carried (`start`'s `trace`), starting when the task was created — with the run's spans
   * (`runAgent`'s `tracing`) and the write-back's call beneath it. @default off: no span at all
   */
  readonly tracing?: TracingOptions;
  /**
   * The tasks' DuckDBs, where `klym__query_artifact` and `query_task_artifact` run: one per task, bounded
   * by `memoryMiB` and `threads`, each query by `timeoutMs`. @default QUERY_DEFAULTS (512 MiB, 2 threads, 30 s)
   */
  readonly artifactQuery?: TaskQueriesOptions;
  /** The clock that says which day (UTC) a principal's spend counts in (`perPrincipal.maxTokensPerDay`), in ms since the epoch. @default Date.now */
  readonly now?: () => number;
}

/** A task's lifecycle, as {@link TaskManagerOptions.onEvent} receives it (noun-verb). */
export type TaskEvent =
  | { readonly type: 'task-create' | 'task-evict'; readonly task: TaskRecord }
  | {
      readonly type: 'task-start' | 'task-resume' | 'task-end';
      readonly task: TaskRecord;
      /** It happened in another process sharing the queue, which had its own event: this one only heard of it. */
      readonly elsewhere?: true;
    }
  | {
      /** A step of the task's run ended in this process. */
      readonly type: 'task-step';
      /** The task as its run began (its usage is not this step's). */
      readonly task: TaskRecord;
      readonly step: number;
      /** The step's own tokens. */
      readonly usage: AgentUsage;
      /** What the step cost, in USD; `undefined` when the model has no price. */
      readonly costUsd: number | undefined;
    }
  | { readonly type: 'task-write-back'; readonly task: TaskRecord };

/** A start refused over a limit: a principal's quota (`QUOTA_EXCEEDED`, `quota` naming it) or the queue's bound (`TASK_QUEUE_FULL`). */
export interface TaskRefusal {
  readonly principal: string;
  readonly code: 'QUOTA_EXCEEDED' | 'TASK_QUEUE_FULL';
  readonly quota?: string;
}

/** Who is asking: tasks are visible only to the principal who started them. */
export interface Caller {
  readonly principal: string;
}

/** How a task is started, beside what it asks for. */
export interface StartOptions {
  /** The W3C trace context of the request that starts it (an MCP request's `params._meta`): kept with the task, the parent of its spans. */
  readonly trace?: TraceCarrier;
  /** Receivers of the task's transitions the caller gave with the start, already admitted (`TaskService.push`): kept on the record. */
  readonly push?: readonly PushTarget[];
}

/** Which page of a task's log to read: the newest `tail` entries, or those after `after` (at most `limit`). */
export type LogPageRequest = { readonly tail: number } | { readonly after?: number; readonly limit?: number };

/** What `cancel` did. */
export interface CancelOutcome {
  /** Whether this call cancelled the task (false when it had already finished or another cancel won). */
  readonly cancelled: boolean;
  readonly task: TaskRecord;
  readonly message: string;
}

/** A task as {@link TaskManager.read} gives it: the record, a page of its log, its artifacts, and its place while it waits. */
export interface TaskReading {
  readonly task: TaskRecord;
  readonly log: TaskLogPage;
  readonly artifacts: readonly ArtifactInfo[];
  /** How many waiting tasks start before it (0: it is next); only while it is `pending` and queued. */
  readonly queuePosition?: number;
}

/** Runs agent tasks in the background: a concurrency limit, a per-task time limit, bounded logs, checkpoints, TTL eviction. */
export interface TaskManager extends AsyncDisposable {
  /**
   * Queues a task and returns it at once (`pending` or `running`). With an `idempotencyKey` the caller used
   * before, returns that task instead, whatever its status.
   * It waits its turn among the tasks of every principal: its rank is 1 + the caller's tasks not yet ended.
   * @throws {KlymError} `SHUTTING_DOWN` after `close()`; `QUOTA_EXCEEDED` past the caller's `perPrincipal`
   * `maxQueued`; `TASK_QUEUE_FULL` past `maxQueued`; `STORE_UNAVAILABLE` when the store or a shared queue
   * cannot be reached (the task, if stored, ends as `error`)
   */
  start(request: TaskRequest, caller: Caller, options?: StartOptions): Promise<TaskRecord>;
  /** @throws {KlymError} `TASK_NOT_FOUND` when no task of that id is visible to `caller` */
  get(id: string, caller: Caller): Promise<TaskRecord>;
  /** Log entries with `seq > after`, at most `limit`. @throws {KlymError} `TASK_NOT_FOUND` */
  logs(id: string, caller: Caller, page?: { readonly after?: number; readonly limit?: number }): Promise<TaskLogPage>;
  /** The newest `count` log entries. @throws {KlymError} `TASK_NOT_FOUND` */
  tail(id: string, caller: Caller, count: number): Promise<TaskLogPage>;
  /**
   * The task and a page of its log, its visibility checked with the one read of the task: `{ tail: n }` for
   * the newest n entries, `{ after, limit }` as `logs` takes them; while it waits, `queuePosition`: how many
   * waiting tasks start before it (`TaskQueue.position`). @throws {KlymError} `TASK_NOT_FOUND`
   */
  read(id: string, caller: Caller, log: LogPageRequest): Promise<TaskReading>;
  /**
   * A page of the task's artifact `artifactId`, as `klym__read_artifact` gives them.
   * @throws {KlymError} `TASK_NOT_FOUND` (another principal's task too); `ARTIFACT_NOT_FOUND`; `INVALID_ARGUMENT` for an offset past the end
   */
  readArtifact(id: string, caller: Caller, artifactId: string, request?: ReadRequest): Promise<ArtifactSlice>;
  /**
   * The task's artifact `artifactId` as its tool gave it: a JSON answer kept as records, its original text byte for byte.
   * @throws {KlymError} `TASK_NOT_FOUND` (another principal's task too); `ARTIFACT_NOT_FOUND`
   */
  artifactOriginal(id: string, caller: Caller, artifactId: string): Promise<{ readonly artifact: ArtifactInfo; readonly text: string }>;
  /**
   * Runs `sql` over the task's artifacts, each a table named by its id, in the task's DuckDB, as
   * `klym__query_artifact` does: a follow-up question on what a task kept, at no model cost.
   * @throws {KlymError} `TASK_NOT_FOUND` (another principal's task too); `ARTIFACT_NOT_FOUND`; `QUERY_FAILED` quoting DuckDB
   */
  queryArtifacts(id: string, caller: Caller, sql: string, options?: { readonly signal?: AbortSignal }): Promise<QueryAnswer>;
  /** Cancels a pending or running task; a finished one is left as it is, and the outcome says so. @throws {KlymError} `TASK_NOT_FOUND` */
  cancel(id: string, caller: Caller, reason?: string): Promise<CancelOutcome>;
  /** A page of the caller's tasks, newest first. */
  list(caller: Caller, filter?: { readonly status?: TaskStatus }, page?: TaskPageRequest): Promise<TaskListPage>;
  /** How many tasks are in each status (all principals). */
  summary(): Promise<Readonly<Record<TaskStatus, number>>>;
  /** The caller's limits (`perPrincipal`), and its tasks running and waiting now. @throws {KlymError} `STORE_UNAVAILABLE` */
  usage(caller: Caller): Promise<PrincipalUsage>;
  /**
   * Refuses new tasks, cancels pending ones, gives running ones `graceMs`, then cancels them with `reason`.
   * On a shared queue, tasks outlive the process instead: pending ones stay queued, and running ones that
   * did not end within `graceMs` are handed back, `running` with their checkpoint, and another process
   * resumes them at once. Idempotent.
   */
  close(options?: { readonly graceMs?: number; readonly reason?: string }): Promise<void>;
}

/**
 * Creates a task manager over a session pool.
 *
 * @throws {KlymError} `CONFIG_INVALID` when a limit is not a positive number (`maxConcurrent` may be 0 on a shared
 * queue; a `perPrincipal` limit must be a positive integer), or a shared queue comes without a `store`.
 * @example
 * ```ts
 * const tasks = createTaskManager({ pool, maxConcurrent: 2, writeBack: { byDefault: true } })
 * const task = await tasks.start({ prompt: 'Check the graph' }, { principal: 'grynya' })
 * const later = await tasks.get(task.id, { principal: 'grynya' })
 * ```
 */
export function createTaskManager(options: TaskManagerOptions): TaskManager {
  const queue = options.queue ?? createInProcessTaskQueue();
  // A front of a shared queue runs nothing itself: its tasks run on the queue's workers.
  const maxConcurrent = queue.shared
    ? atLeastZero('maxConcurrent', options.maxConcurrent ?? TASK_DEFAULTS.concurrency)
    : positive('maxConcurrent', options.maxConcurrent ?? TASK_DEFAULTS.concurrency);
  if (queue.shared && options.store === undefined) {
    throw new KlymError(
      'CONFIG_INVALID',
      "A shared task queue needs a `store` that every process sharing it uses too; the default in-memory store is this process's own",
    );
  }
  const maxQueued = positive('maxQueued', options.maxQueued ?? TASK_DEFAULTS.maxQueued);
  const taskTimeoutMs = positive('taskTimeoutMs', options.taskTimeoutMs ?? TASK_DEFAULTS.timeoutMs);
  const ttlMs = positive('ttlMs', options.ttlMs ?? TASK_DEFAULTS.ttlMs);
  const resumeOnRestart = options.resumeOnRestart ?? TASK_DEFAULTS.resumeOnRestart;
  const store = options.store ?? createMemoryTaskStore(options.log === undefined ? {} : { log: options.log });
  const run: AgentRunner = options.run ?? runAgent;
  const defaults = options.defaults ?? {};
  const secrets = secretsOf(options.secrets, defaults.providers);
  const queries = createTaskQueries(options.artifactQuery);
  const admission = createTaskAdmission({
    store,
    queue,
    maxQueued,
    ...(options.perPrincipal === undefined ? {} : { perPrincipal: options.perPrincipal }),
    ...(options.now === undefined ? {} : { now: options.now }),
  });
  const execution = createTaskExecution({
    store,
    pool: options.pool,
    run,
    // Core's runners redact every event with the run's secrets (a superset of the manager's): not done twice.
    eventsRedacted: run === runAgent || run.redactsEvents === true,
    defaults,
    secrets,
    redact: createRedactor(secrets),
    taskTimeoutMs,
    resumeOnRestart,
    writeBack: options.writeBack,
    onEvent: (event) => {
      // Every end passes here, this process's own and those heard from others: how long runs take lately.
      if (event.type === 'task-end') admission.ended(event.task);
      options.onEvent?.(event);
    },
    tracing: options.tracing,
    announce: (type, id) => queue.announce(type, id),
    queries,
    spend: admission.spend,
  });
  const { log, emit, finish } = execution;
  let closing: Promise<void> | undefined;
  let closeReason = 'shutdown';

  const visible = async (id: string, caller: Caller): Promise<TaskRecord> => {
    const task = typeof id === 'string' ? await store.get(id) : undefined;
    if (task === undefined || task.principal !== caller.principal) {
      throw new KlymError('TASK_NOT_FOUND', `No task "${String(id).slice(0, 80)}" is visible to you: the id is unknown, or the task finished and was evicted`);
    }
    return task;
  };
  // Paging through an artifact reads it from the store once: a few tasks' readers stay, the last used kept longest.
  const readers = new Map<string, ArtifactStore>();
  const readerOf = (id: string): ArtifactStore => {
    const reader = readers.get(id) ?? createArtifactStore({ backend: taskArtifacts(store, id) });
    readers.delete(id);
    readers.set(id, reader);
    for (const old of readers.keys()) if (readers.size > TASK_DEFAULTS.artifactReaders) readers.delete(old);
    return reader;
  };

  const cancelTask = async (id: string, reason: string): Promise<TaskRecord | undefined> => {
    const task = await finish(id, ['pending', 'running'], { status: 'cancelled', currentStep: 'cancelled', cancelReason: reason });
    if (task === undefined) return undefined;
    // The cancel is stored: a run the queue cannot reach now stops when its process learns of it.
    await queue.cancel(id, reason).catch(() => {});
    return task;
  };

  queue.open({
    concurrency: maxConcurrent,
    runningLimit: admission.runningLimit,
    run: execution.run,
    cancel: async (id) => void (await cancelTask(id, closeReason)),
    interrupt: (id, why) => execution.interrupt(id, why),
    hasEnded: async (id) => {
      const task = await store.get(id);
      return task === undefined || isTerminal(task.status);
    },
    heardElsewhere: (type, id) =>
      void store.get(id).then(
        (task) => task !== undefined && (type === 'task-end') === isTerminal(task.status) && emit({ type, task, elsewhere: true }),
        () => {},
      ),
  });

  /**
   * Takes up what a process that died left in the store. In-process: running tasks resume from their
   * checkpoint (or end as `TASK_INTERRUPTED`), pending ones queue oldest first behind them, and a write-back
   * that was under way is reported as of unknown outcome, never made twice. Each keeps its turn: its rank is
   * 1 + its principal's unfinished tasks created before it. On a shared queue, other
   * processes may be running those tasks right now: each unfinished one is only added again (a no-op for
   * a task queued or running), for one whose job was lost — a front that stopped between storing a task
   * and queueing it; the run that takes it up decides, and a write-back is settled by the run that finds
   * its task ended.
   */
  const recover = async (): Promise<void> => {
    const found = await store.unfinished();
    // Resumed runs first (they were running), then pending tasks, oldest first.
    const running = found.filter((task) => task.status === 'running');
    const pending = found.filter((task) => task.status === 'pending');
    const placements = admission.placementsOf(found);
    if (queue.shared) {
      for (const task of [...running, ...pending]) await queue.add(task.id, placements.get(task.id)).catch(() => {});
      return;
    }
    for (const task of found) {
      if (task.status === 'running' && !resumeOnRestart) await execution.interrupt(task.id, notResumed);
      else if (isTerminal(task.status)) await execution.settleWriteBack(task);
    }
    for (const task of resumeOnRestart ? [...running, ...pending] : pending) await queue.add(task.id, placements.get(task.id));
  };
  const recovered = recover().catch(() => {});

  const sweep = async (): Promise<void> => {
    for (const task of await store.evict(new Date(Date.now() - ttlMs))) emit({ type: 'task-evict', task });
  };
  const sweeper = setInterval(() => void sweep().catch(() => {}), Math.min(ttlMs, 60_000));
  sweeper.unref();

  const manager: TaskManager = {
    async start(request, caller, startOptions = {}) {
      if (closing) throw new KlymError('SHUTTING_DOWN', 'Klym is shutting down and takes no new tasks');
      await recovered;
      if (request.idempotencyKey !== undefined) {
        const existing = await store.findByIdempotencyKey(caller.principal, request.idempotencyKey);
        if (existing !== undefined) return existing;
      }
      const { placement, startsAtOnce } = await admission.admit(caller.principal).catch((error: unknown) => {
        if (isKlymError(error, 'QUOTA_EXCEEDED') || isKlymError(error, 'TASK_QUEUE_FULL')) {
          const refusal: TaskRefusal = {
            principal: caller.principal,
            code: isKlymError(error, 'QUOTA_EXCEEDED') ? 'QUOTA_EXCEEDED' : 'TASK_QUEUE_FULL',
            ...(error.quota === undefined ? {} : { quota: error.quota }),
          };
          try {
            options.onRefuse?.(refusal);
          } catch {
            // A listener's failure is its own: the caller still hears why it was refused.
          }
        }
        throw error;
      });
      const id = randomBytes(16).toString('base64url');
      const task: TaskRecord = {
        id,
        principal: caller.principal,
        request,
        status: 'pending',
        createdAt: new Date().toISOString(),
        currentStep: startsAtOnce ? 'starting' : 'queued',
        usage: { steps: 0, inputTokens: 0, outputTokens: 0, totalTokens: 0, costUsd: undefined },
        ...(startOptions.trace === undefined ? {} : { trace: startOptions.trace }),
        ...(startOptions.push === undefined || startOptions.push.length === 0 ? {} : { push: startOptions.push }),
      };
      const stored = await store.insert(task);
      if (stored.id !== id) return stored; // another start with the same key won
      // close() began while the store wrote: it has already swept the queue, so this task must not run.
      if (closing) return (await finish(id, ['pending'], { status: 'cancelled', currentStep: 'cancelled', cancelReason: closeReason })) ?? task;
      log(id, 'task-create', {
        model: request.model ?? defaults.model ?? 'default',
        recordResult: request.recordResult ?? options.writeBack?.byDefault ?? false,
      });
      emit({ type: 'task-create', task });
      try {
        await queue.add(id, placement);
      } catch (error) {
        // Told it failed, the caller may start it again: this one must never run as well.
        const message = error instanceof Error ? error.message : String(error);
        await finish(id, ['pending'], { status: 'error', currentStep: 'failed', error: { code: 'STORE_UNAVAILABLE', message } }).catch(() => {});
        throw error;
      }
      return (await store.get(id)) ?? task;
    },
    get: visible,
    async logs(id, caller, page = {}) {
      await visible(id, caller);
      return store.readLog(id, page.after ?? 0, page.limit ?? TASK_DEFAULTS.managerLogPageSize);
    },
    async tail(id, caller, count) {
      await visible(id, caller);
      return store.tailLog(id, count);
    },
    async read(id, caller, page) {
      const task = await visible(id, caller);
      const [logPage, artifacts, queuePosition] = await Promise.all([
        'tail' in page ? store.tailLog(id, page.tail) : store.readLog(id, page.after ?? 0, page.limit ?? TASK_DEFAULTS.managerLogPageSize),
        store.listArtifacts(id),
        task.status === 'pending' ? queue.position(id) : undefined,
      ]);
      return { task, log: logPage, artifacts, ...(queuePosition === undefined ? {} : { queuePosition }) };
    },
    async readArtifact(id, caller, artifactId, request = {}) {
      await visible(id, caller);
      return readerOf(id).read(artifactId, request);
    },
    async queryArtifacts(id, caller, sql, queryOptions = {}) {
      await visible(id, caller);
      return queries.query(id, taskArtifacts(store, id), sql, queryOptions);
    },
    async artifactOriginal(id, caller, artifactId) {
      await visible(id, caller);
      const stored = await store.loadArtifact(id, artifactId);
      // The reader's error names the task's artifacts.
      if (stored === undefined) await readerOf(id).lines(artifactId);
      const { text, original, ...artifact } = stored as StoredArtifact;
      return { artifact, text: original ?? text };
    },
    async cancel(id, caller, reason = 'cancelled by caller') {
      const before = await visible(id, caller);
      const task = isTerminal(before.status) ? undefined : await cancelTask(id, reason);
      if (task !== undefined) return { cancelled: true, task, message: `Task ${id} is cancelled` };
      const now = await visible(id, caller);
      return { cancelled: false, task: now, message: `Task ${id} had already ended as ${now.status}; nothing changed` };
    },
    async list(caller, filter = {}, page = {}) {
      return store.list({ principal: caller.principal, ...(filter.status === undefined ? {} : { status: filter.status }) }, page);
    },
    summary: () => store.counts(),
    usage: (caller) => admission.usage(caller.principal),
    close({ graceMs = TASK_DEFAULTS.shutdownGraceMs, reason = 'shutdown' } = {}) {
      if (closing === undefined) closeReason = reason;
      closing ??= (async () => {
        clearInterval(sweeper);
        await recovered;
        await queue.close({ graceMs });
        await queries.close();
        // Whoever creates a resource closes it: the default store is the manager's own.
        if (options.store === undefined) await store.close();
      })();
      return closing;
    },
    [Symbol.asyncDispose]: () => manager.close({ graceMs: 0 }),
  };
  return manager;
}

function positive(name: string, value: number): number {
  if (!Number.isFinite(value) || value <= 0) throw new KlymError('CONFIG_INVALID', `Expected \`${name}\` to be a positive number, got ${value}`);
  return value;
}

function atLeastZero(name: string, value: number): number {
  if (!Number.isFinite(value) || value < 0) throw new KlymError('CONFIG_INVALID', `Expected \`${name}\` to be a number of at least 0, got ${value}`);
  return value;
}
