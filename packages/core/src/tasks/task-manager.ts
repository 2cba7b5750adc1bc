import { randomBytes } from 'node:crypto';
import type { AgentCheckpoint, AgentEvent, AgentRunResult, RunAgentOptions } from '../agent/types.ts';
import { TASK_DEFAULTS } from '../defaults.ts';
import { runAgent } from '../agent/run-agent.ts';
import { KlymError, isKlymError } from '../errors.ts';
import { raceAbort } from '../internal/abort.ts';
import { createRedactor } from '../redact.ts';
import type { SessionPool } from '../pool/session-pool.ts';
import { createMemoryTaskStore } from './memory-task-store.ts';
import { createProgress, eventData } from './task-progress.ts';
import type { BoundedLogOptions, TaskLogPage } from './task-log.ts';
import { completionOf, runOptionsOf, type TaskRunDefaults } from './task-run.ts';
import { isTerminal, type TaskListPage, type TaskPageRequest, type TaskRecord, type TaskRequest, type TaskStatus, type TaskStore } from './task-types.ts';
import { writeBackResult, type WriteBackOptions } from './write-back.ts';

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
  /** Tasks running at once; more wait as `pending`. @default 4 */
  readonly maxConcurrent?: number;
  /** Tasks waiting as `pending` at most; one more is refused with `TASK_QUEUE_FULL`, so a caller cannot grow the queue without bound. @default 1_000 */
  readonly maxQueued?: number;
  /** Run time limit of one task, across restarts; it also caps the run's `budget.timeoutMs`. Hitting it is `error` with `TASK_TIMEOUT`. @default 1_800_000 */
  readonly taskTimeoutMs?: number;
  /** How long a finished task stays visible before it is evicted. @default 3_600_000 */
  readonly ttlMs?: number;
  /**
   * What happens to a task the store holds as `running` when the manager starts (its process died): resume
   * it from its last checkpoint (`true`), or end it as `error` with `TASK_INTERRUPTED`, its log intact. @default true
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
}

/** A task's lifecycle, as {@link TaskManagerOptions.onEvent} receives it (noun-verb). */
export type TaskEvent =
  | { readonly type: 'task-create' | 'task-start' | 'task-resume' | 'task-end' | 'task-evict'; readonly task: TaskRecord }
  | { readonly type: 'task-write-back'; readonly task: TaskRecord };

/** Who is asking: tasks are visible only to the principal who started them. */
export interface Caller {
  readonly principal: string;
}

/** What `cancel` did. */
export interface CancelOutcome {
  /** Whether this call cancelled the task (false when it had already finished or another cancel won). */
  readonly cancelled: boolean;
  readonly task: TaskRecord;
  readonly message: string;
}

/** Runs agent tasks in the background: a concurrency limit, a per-task time limit, bounded logs, checkpoints, TTL eviction. */
export interface TaskManager extends AsyncDisposable {
  /**
   * Queues a task and returns it at once (`pending` or `running`). With an `idempotencyKey` the caller used
   * before, returns that task instead, whatever its status.
   * @throws {KlymError} `SHUTTING_DOWN` after `close()`; `TASK_QUEUE_FULL` past `maxQueued`
   */
  start(request: TaskRequest, caller: Caller): Promise<TaskRecord>;
  /** @throws {KlymError} `TASK_NOT_FOUND` when no task of that id is visible to `caller` */
  get(id: string, caller: Caller): Promise<TaskRecord>;
  /** Log entries with `seq > after`, at most `limit`. @throws {KlymError} `TASK_NOT_FOUND` */
  logs(id: string, caller: Caller, page?: { readonly after?: number; readonly limit?: number }): Promise<TaskLogPage>;
  /** The newest `count` log entries. @throws {KlymError} `TASK_NOT_FOUND` */
  tail(id: string, caller: Caller, count: number): Promise<TaskLogPage>;
  /** Cancels a pending or running task; a finished one is left as it is, and the outcome says so. @throws {KlymError} `TASK_NOT_FOUND` */
  cancel(id: string, caller: Caller, reason?: string): Promise<CancelOutcome>;
  /** A page of the caller's tasks, newest first. */
  list(caller: Caller, filter?: { readonly status?: TaskStatus }, page?: TaskPageRequest): Promise<TaskListPage>;
  /** How many tasks are in each status (all principals). */
  summary(): Promise<Readonly<Record<TaskStatus, number>>>;
  /** Refuses new tasks, cancels pending ones, gives running ones `graceMs`, then cancels them with `reason`. Idempotent. */
  close(options?: { readonly graceMs?: number; readonly reason?: string }): Promise<void>;
}

/**
 * Creates a task manager over a session pool.
 *
 * @throws {KlymError} `CONFIG_INVALID` when a limit is not a positive number.
 * @example
 * ```ts
 * const tasks = createTaskManager({ pool, maxConcurrent: 2, writeBack: { byDefault: true } })
 * const task = await tasks.start({ prompt: 'Check the graph' }, { principal: 'grynya' })
 * const later = await tasks.get(task.id, { principal: 'grynya' })
 * ```
 */
export function createTaskManager(options: TaskManagerOptions): TaskManager {
  const maxConcurrent = positive('maxConcurrent', options.maxConcurrent ?? TASK_DEFAULTS.concurrency);
  const maxQueued = positive('maxQueued', options.maxQueued ?? TASK_DEFAULTS.maxQueued);
  const taskTimeoutMs = positive('taskTimeoutMs', options.taskTimeoutMs ?? TASK_DEFAULTS.timeoutMs);
  const ttlMs = positive('ttlMs', options.ttlMs ?? TASK_DEFAULTS.ttlMs);
  const resumeOnRestart = options.resumeOnRestart ?? TASK_DEFAULTS.resumeOnRestart;
  const store = options.store ?? createMemoryTaskStore(options.log === undefined ? {} : { log: options.log });
  const run: AgentRunner = options.run ?? runAgent;
  // Core's runners redact every event with the run's secrets (a superset of the manager's): not done twice.
  const eventsRedacted = run === runAgent || run.redactsEvents === true;
  const defaults = options.defaults ?? {};
  const providerKeys = [defaults.providers?.openai?.apiKey, defaults.providers?.google?.apiKey, defaults.providers?.compatible?.apiKey];
  const secrets = [...(options.secrets ?? []), ...providerKeys.filter((key): key is string => typeof key === 'string')];
  const redact = createRedactor(secrets);
  const queue: string[] = [];
  const live = new Map<string, { controller: AbortController; done: Promise<void> }>();
  /** Tasks the store held as `running` at start-up: their run continues from its checkpoint. */
  const resuming = new Set<string>();
  let running = 0;
  let closing: Promise<void> | undefined;
  let closeReason = 'shutdown';

  const emit = (event: TaskEvent): void => {
    try {
      options.onEvent?.(event);
    } catch {
      // A listener's failure must not break a task.
    }
  };
  const log = (id: string, type: string, data: Readonly<Record<string, unknown>>): void => store.appendLog(id, type, redact.value(data));
  const logEvent = (id: string, event: AgentEvent): void => {
    const data = eventData(event);
    store.appendLog(id, event.type, eventsRedacted ? data : redact.value(data));
  };

  const visible = async (id: string, caller: Caller): Promise<TaskRecord> => {
    const task = typeof id === 'string' ? await store.get(id) : undefined;
    if (task === undefined || task.principal !== caller.principal) {
      throw new KlymError('TASK_NOT_FOUND', `No task "${String(id).slice(0, 80)}" is visible to you: the id is unknown, or the task finished and was evicted`);
    }
    return task;
  };

  const finish = async (id: string, from: readonly TaskStatus[], patch: Parameters<TaskStore['transition']>[2]): Promise<TaskRecord | undefined> => {
    const task = await store.transition(id, from, { ...patch, finishedAt: new Date().toISOString() });
    if (task !== undefined) {
      log(id, 'task-end', { status: task.status, ...(task.error ? { error: task.error } : {}), ...(task.cancelReason ? { reason: task.cancelReason } : {}) });
      emit({ type: 'task-end', task });
    }
    return task;
  };

  const execute = async (id: string, controller: AbortController): Promise<void> => {
    const resumed = resuming.delete(id);
    // A resumed task keeps the time it first started.
    const task = resumed
      ? await store.transition(id, ['running'], { currentStep: 'resuming' })
      : await store.transition(id, ['pending'], { status: 'running', startedAt: new Date().toISOString(), currentStep: 'starting' });
    if (task === undefined) return; // cancelled while it waited
    const checkpoint = resumed ? await store.loadCheckpoint(id) : undefined;
    const spentMs = checkpoint?.elapsedMs ?? 0;
    if (resumed) {
      const fromStep = checkpoint?.steps ?? 0;
      await store.update(id, { resumes: [...(task.resumes ?? []), fromStep] });
      log(id, 'task-resume', { fromStep, interruptedCalls: checkpoint?.current?.calls.filter((call) => call.output === undefined).map((call) => call.toolName) ?? [] });
      emit({ type: 'task-resume', task });
    } else {
      emit({ type: 'task-start', task });
      log(id, 'task-start', { model: task.request.model ?? defaults.model ?? 'default' });
    }
    // The limit counts run time across restarts, as the run's own budgets do.
    const leftMs = Math.max(0, taskTimeoutMs - spentMs);
    const timer = setTimeout(() => controller.abort(new KlymError('TASK_TIMEOUT', `Task ${id} ran past its run-time limit of ${taskTimeoutMs} ms`)), leftMs);
    const progress = createProgress(store, task);
    const onEvent = (event: AgentEvent): void => {
      try {
        logEvent(id, event);
        // Events after a cancel or timeout are logged, but the task's step and usage stay as they ended.
        if (!controller.signal.aborted) progress.apply(event);
      } catch {
        // A malformed event must not break the run.
      }
    };
    const onCheckpoint = (saved: AgentCheckpoint): void | Promise<void> => {
      const stored = store.saveCheckpoint(id, saved);
      if (saved.current === undefined) progress.note({ elapsedMs: saved.elapsedMs });
      return stored;
    };
    // The task's own sessions of `task`-scoped upstreams: closed in `finally`, on cancel, timeout and shutdown too.
    const scope = options.pool.openScope(id);
    const runOptions = runOptionsOf(task, { pool: options.pool, scope, defaults, secrets, taskTimeoutMs, signal: controller.signal, onEvent, onCheckpoint, checkpoint });
    try {
      const result = await raceAbort(Promise.resolve().then(() => run(runOptions)), controller.signal).finally(progress.save);
      if (result.finishReason === 'cancelled' || controller.signal.aborted) throw controller.signal.reason ?? new KlymError('ABORTED', `Task ${id} was cancelled`);
      const record = task.request.recordResult ?? options.writeBack?.byDefault ?? false;
      const done = await finish(id, ['running'], completionOf(task, result, { checkpoint, writeBack: record, redact }));
      if (done !== undefined && record) await recordResult(done);
    } catch (error) {
      const reason: unknown = controller.signal.aborted ? controller.signal.reason : error;
      if (isKlymError(reason, 'TASK_TIMEOUT')) {
        await finish(id, ['running'], { status: 'error', currentStep: 'timed out', error: { code: 'TASK_TIMEOUT', message: reason.message } });
      } else if (!controller.signal.aborted) {
        const code = isKlymError(error) ? error.code : 'INTERNAL';
        const message = error instanceof Error ? error.message : String(error);
        await finish(id, ['running'], { status: 'error', currentStep: 'failed', error: { code, message: redact.text(message) } });
      }
      // Aborted by cancel(): the cancel already made the task `cancelled`.
    } finally {
      clearTimeout(timer);
      // A run that ignored its abort still has its calls cut here: the scope aborts what it has in flight.
      await scope.close();
    }
  };

  const recordResult = async (task: TaskRecord): Promise<void> => {
    const text = task.result?.finalText ?? '';
    const provenance = {
      prompt: redact.text(task.request.prompt),
      model: task.result?.model ?? task.request.model ?? defaults.model ?? 'unknown',
      principal: task.principal,
      finishReason: task.result?.finishReason ?? 'unknown',
    };
    const outcome = await writeBackResult(options.pool, { id: task.id, text, time: new Date(task.finishedAt ?? Date.now()), provenance }, options.writeBack);
    const updated = await store.update(task.id, { writeBack: outcome.error === undefined ? outcome : { ...outcome, error: redact.text(outcome.error) } });
    log(task.id, 'write-back', { ...outcome });
    if (updated !== undefined) emit({ type: 'task-write-back', task: updated });
  };

  const enqueue = (id: string): void => {
    live.set(id, { controller: new AbortController(), done: Promise.resolve() });
    queue.push(id);
  };

  const pump = (): void => {
    while (running < maxConcurrent && queue.length > 0) {
      const id = queue.shift() as string;
      const controller = live.get(id)?.controller;
      if (controller === undefined) continue;
      running++;
      const done = execute(id, controller)
        .catch(() => {})
        .finally(() => {
          running--;
          live.delete(id);
          pump();
        });
      live.set(id, { controller, done });
    }
  };

  /**
   * Takes up what a process that died left in the store: running tasks resume from their checkpoint (or
   * end as `TASK_INTERRUPTED`), pending ones queue oldest first behind them, and a write-back that was under
   * way is reported as of unknown outcome, never made twice.
   */
  const recover = async (): Promise<void> => {
    const found = await store.unfinished();
    for (const task of found) {
      if (task.status === 'running' && resumeOnRestart) {
        resuming.add(task.id);
        enqueue(task.id);
      } else if (task.status === 'running') {
        const step = (await store.loadCheckpoint(task.id))?.steps ?? 0;
        await finish(task.id, ['running'], {
          status: 'error',
          currentStep: 'interrupted',
          error: { code: 'TASK_INTERRUPTED', message: `Klym stopped while this task was running (after step ${step}); tasks.resumeOnRestart is off, so it was not resumed` },
        });
      } else if (task.writeBack?.status === 'pending') {
        const error = `Klym stopped while writing the result: the node ${task.writeBack.nodeId} may or may not have been written; it was not written again`;
        await store.update(task.id, { writeBack: { ...task.writeBack, status: 'failed', error } });
        log(task.id, 'write-back', { status: 'failed', nodeId: task.writeBack.nodeId, error });
      }
    }
    // Resumed runs first (they were running), then pending tasks, oldest first.
    queue.sort((a, b) => Number(resuming.has(b)) - Number(resuming.has(a)));
    for (const task of found) if (task.status === 'pending') enqueue(task.id);
    pump();
  };
  const recovered = recover().catch(() => {});

  const sweep = async (): Promise<void> => {
    for (const task of await store.evict(new Date(Date.now() - ttlMs))) emit({ type: 'task-evict', task });
  };
  const sweeper = setInterval(() => void sweep().catch(() => {}), Math.min(ttlMs, 60_000));
  sweeper.unref();

  const cancelTask = async (id: string, reason: string): Promise<TaskRecord | undefined> => {
    const task = await finish(id, ['pending', 'running'], { status: 'cancelled', currentStep: 'cancelled', cancelReason: reason });
    if (task === undefined) return undefined;
    const queued = queue.indexOf(id);
    if (queued >= 0) {
      queue.splice(queued, 1);
      live.delete(id);
    }
    live.get(id)?.controller.abort(new KlymError('ABORTED', `Task ${id} was cancelled: ${reason}`));
    return task;
  };

  const manager: TaskManager = {
    async start(request, caller) {
      if (closing) throw new KlymError('SHUTTING_DOWN', 'Klym is shutting down and takes no new tasks');
      await recovered;
      if (request.idempotencyKey !== undefined) {
        const existing = await store.findByIdempotencyKey(caller.principal, request.idempotencyKey);
        if (existing !== undefined) return existing;
      }
      if (queue.length >= maxQueued) {
        throw new KlymError('TASK_QUEUE_FULL', `Klym has ${queue.length} tasks waiting (tasks.maxQueued ${maxQueued}); try again when some have started`);
      }
      const id = randomBytes(16).toString('base64url');
      const task: TaskRecord = {
        id,
        principal: caller.principal,
        request,
        status: 'pending',
        createdAt: new Date().toISOString(),
        currentStep: running < maxConcurrent ? 'starting' : 'queued',
        usage: { steps: 0, inputTokens: 0, outputTokens: 0, totalTokens: 0, costUsd: undefined },
      };
      const stored = await store.insert(task);
      if (stored.id !== id) return stored; // another start with the same key won
      // close() began while the store wrote: it has already swept the queue, so this task must not run.
      if (closing) return (await finish(id, ['pending'], { status: 'cancelled', currentStep: 'cancelled', cancelReason: closeReason })) ?? task;
      log(id, 'task-create', { model: request.model ?? defaults.model ?? 'default', recordResult: request.recordResult ?? options.writeBack?.byDefault ?? false });
      emit({ type: 'task-create', task });
      enqueue(id);
      pump();
      return (await store.get(id)) ?? task;
    },
    get: visible,
    async logs(id, caller, page = {}) {
      await visible(id, caller);
      return store.readLog(id, page.after ?? 0, page.limit ?? 50);
    },
    async tail(id, caller, count) {
      await visible(id, caller);
      return store.tailLog(id, count);
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
    close({ graceMs = TASK_DEFAULTS.shutdownGraceMs, reason = 'shutdown' } = {}) {
      if (closing === undefined) closeReason = reason;
      closing ??= (async () => {
        clearInterval(sweeper);
        await recovered;
        for (const id of queue.splice(0)) await cancelTask(id, reason);
        const runs = [...live.values()].map((entry) => entry.done);
        let timer: NodeJS.Timeout | undefined;
        const grace = new Promise<void>((resolve) => (timer = setTimeout(resolve, graceMs)));
        await Promise.race([Promise.all(runs), grace]);
        clearTimeout(timer);
        await Promise.all([...live.keys()].map((id) => cancelTask(id, reason)));
        await Promise.all([...live.values()].map((entry) => entry.done));
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
