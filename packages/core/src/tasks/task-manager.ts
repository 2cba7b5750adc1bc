import { randomBytes } from 'node:crypto';
import { TASK_DEFAULTS } from '../defaults.ts';
import { runAgent } from '../agent/run-agent.ts';
import { isKlymError, KlymError } from '../errors.ts';
import { createRedactor, secretsOf } from '../redact.ts';
import { createMemoryTaskStore } from './store/memory-task-store.ts';
import { createInProcessTaskQueue } from './queue/in-process-queue.ts';
import { createTaskAdmission } from './admission/task-admission.ts';
import { createTaskExecution, notResumed } from './task-execution.ts';
import { isTerminal, UNFINISHED_STATUSES, type TaskInput, type TaskRecord, type TaskReply } from './store/task-types.ts';
import { createArtifactReader, type ArtifactReader } from '../artifacts/artifact-reader.ts';
import type { StoredArtifact } from '../artifacts/artifact-types.ts';
import { taskArtifacts } from './runner/task-artifacts.ts';
import { createTaskQueries } from './runner/task-queries.ts';
import type { AgentRunner, Caller, TaskManager, TaskManagerOptions, TaskRefusal } from './task-manager-types.ts';
import { resolveTaskSettings, type TaskManagerWiring, type TaskSettings } from './task-settings.ts';

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
  return createTaskManagerWith(resolveTaskSettings(options, queue.shared), { ...options, queue });
}

/**
 * {@link createTaskManager} on settings resolved already (the task service resolves them once, for itself too).
 * @throws {KlymError} `CONFIG_INVALID` for a shared queue without a `store`, or a bad `perPrincipal` limit
 */
export function createTaskManagerWith(settings: TaskSettings, options: TaskManagerWiring): TaskManager {
  const queue = options.queue ?? createInProcessTaskQueue();
  // A front of a shared queue runs nothing itself: its tasks run on the queue's workers.
  const { maxConcurrent, maxQueued, taskTimeoutMs, ttlMs, resumeOnRestart, inputTimeoutMs } = settings;
  if (queue.shared && options.store === undefined) {
    throw new KlymError(
      'CONFIG_INVALID',
      "A shared task queue needs a `store` that every process sharing it uses too; the default in-memory store is this process's own",
    );
  }
  const now = options.now ?? Date.now;
  const store = options.store ?? createMemoryTaskStore(options.log === undefined ? {} : { log: options.log });
  const run: AgentRunner = options.run ?? runAgent;
  const defaults = options.defaults ?? {};
  // The pool's upstream credentials too: a library user need not list them for an upstream's echo of one to be scrubbed.
  const secrets = secretsOf(options.secrets, defaults.providers, options.pool);
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
    writeBack: settings.writeBack,
    onEvent: (event) => {
      // Every end passes here, this process's own and those heard from others: how long runs take lately.
      if (event.type === 'task-end') admission.ended(event.task);
      options.onEvent?.(event);
    },
    tracing: options.tracing,
    announce: (type, id) => queue.announce(type, id),
    requeue: (id, principal) => queue.add(id, { principal, rank: 1 }),
    queries,
    spend: admission.spend,
    askCaller: settings.askCaller,
    now,
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
  // Paging through an artifact indexes its lines once: a few tasks' readers stay, the last used kept longest.
  // Each keeps line offsets only, and loads a page's lines from the store by range.
  const readers = new Map<string, ArtifactReader>();
  const readerOf = (id: string): ArtifactReader => {
    const reader =
      readers.get(id) ??
      createArtifactReader(
        { list: () => store.listArtifacts(id), loadRange: (artifactId, start, end) => store.loadArtifactRange(id, artifactId, start, end) },
        options.artifactReading,
      );
    readers.delete(id);
    readers.set(id, reader);
    for (const old of readers.keys()) if (readers.size > TASK_DEFAULTS.artifactReaders) readers.delete(old);
    return reader;
  };

  const cancelTask = async (id: string, reason: string): Promise<TaskRecord | undefined> => {
    const task = await finish(id, UNFINISHED_STATUSES, { status: 'cancelled', currentStep: 'cancelled', cancelReason: reason });
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
  /**
   * Ends as `INPUT_TIMEOUT` each task that has waited for its caller's answer past `inputTimeoutMs` (by `now`):
   * at open, so a wait spans restarts, and on a timer. Of many processes sharing a store, one ends each.
   */
  const expireInputs = async (): Promise<void> => {
    const due = now() - inputTimeoutMs;
    let cursor: string | undefined;
    do {
      const page = await store.list({ status: 'input_required' }, { limit: 200, ...(cursor === undefined ? {} : { cursor }) });
      for (const task of page.tasks) {
        if (task.input === undefined || Date.parse(task.input.askedAt) > due) continue;
        const what =
          task.input.kind === 'approval'
            ? `waited for its caller's approval of ${task.input.call?.toolName ?? 'a call'} and no decision came`
            : 'asked its caller a question and no answer came';
        const message = `Task ${task.id} ${what} within ${inputTimeoutMs} ms (tasks.inputTimeoutMs)`;
        await finish(task.id, ['input_required'], { status: 'error', currentStep: 'no answer', error: { code: 'INPUT_TIMEOUT', message } });
      }
      cursor = page.nextCursor;
    } while (cursor !== undefined);
  };
  const recovered = recover()
    .catch(() => {})
    .then(() => expireInputs())
    .catch(() => {});
  const inputChecker = setInterval(() => void expireInputs().catch(() => {}), Math.min(inputTimeoutMs, TASK_DEFAULTS.inputCheckMs));
  inputChecker.unref();

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
      const { placement, startsAtOnce, admitted } = await admission.admit(caller.principal).catch((error: unknown) => {
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
      // Until the task is in the queue, the principal's next start waits to be counted after it (its maxQueued).
      try {
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
          recordResult: request.recordResult ?? settings.writeBack.byDefault,
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
      } finally {
        admitted();
      }
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
      if (stored === undefined) await readerOf(id).info(artifactId);
      const { text, original, ...artifact } = stored as StoredArtifact;
      return { artifact, text: original ?? text };
    },
    async reply(id, caller, reply, { replyId } = {}) {
      if (closing) throw new KlymError('SHUTTING_DOWN', 'Klym is shutting down and takes no replies');
      await recovered;
      const refuse = (task: TaskRecord): never => {
        const answeredAt = task.input?.answeredAt;
        throw new KlymError(
          'TASK_NOT_WAITING',
          answeredAt !== undefined && task.status !== 'input_required'
            ? `Task ${id}'s ${task.input?.kind === 'approval' ? 'call' : 'question'} was already ${task.input?.kind === 'approval' ? 'decided' : 'answered'} at ${answeredAt}; the first reply stands (the task is ${task.status})`
            : `Task ${id} is ${task.status}, not waiting for input: only a task in input_required takes a reply`,
        );
      };
      const task = await visible(id, caller);
      if (task.status !== 'input_required' || task.input === undefined) return refuse(task);
      const given = replyOf(id, task.input, reply);
      const input: TaskInput = { ...task.input, ...given, answeredAt: new Date(now()).toISOString(), ...(replyId === undefined ? {} : { replyId }) };
      // Of two replies at once, one moves the task: the first answer wins, and the other is refused.
      const answered = await store.transition(id, ['input_required'], { status: 'pending', currentStep: 'answered: queued to go on', input });
      if (answered === undefined) return refuse(await visible(id, caller));
      log(id, 'input-answered', {
        toolCallId: input.toolCallId,
        ...(input.answer === undefined ? { approved: input.approved === true } : { chars: input.answer.length }),
      });
      try {
        // Ahead of the principal's waiting starts: it was running when it asked. The run that asked may still
        // hold the task's place in the queue as it ends: the queue's add sees to that (`TaskQueue.add`).
        await queue.add(id, { principal: task.principal, rank: 1 });
      } catch (error) {
        const reason = error instanceof Error ? error.message : String(error);
        throw new KlymError(
          'STORE_UNAVAILABLE',
          `Task ${id}'s answer is kept, but the task could not be queued (${reason}); it goes on when Klym next starts`,
          {
            cause: error,
          },
        );
      }
      return (await store.get(id)) ?? answered;
    },
    async cancel(id, caller, reason = 'cancelled by caller') {
      const before = await visible(id, caller);
      const task = isTerminal(before.status) ? undefined : await cancelTask(id, reason);
      if (task !== undefined) return { cancelled: true, task, message: `Task ${id} is cancelled` };
      const current = await visible(id, caller);
      return { cancelled: false, task: current, message: `Task ${id} had already ended as ${current.status}; nothing changed` };
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
        clearInterval(inputChecker);
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

/**
 * What a reply gives the waiting `input`: an answer to a question, a decision on an approval.
 * @throws {KlymError} `INVALID_ARGUMENT` naming what was wrong (a decision to a question, an answer to an approval, a wrong type)
 */
function replyOf(id: string, input: TaskInput, reply: TaskReply): Pick<TaskInput, 'answer' | 'approved' | 'reason'> {
  const given = reply as { answer?: unknown; approve?: unknown; reason?: unknown };
  if (input.kind === 'approval') {
    if (typeof given.approve !== 'boolean') {
      const what = given.answer === undefined ? `\`approve\` ${given.approve === undefined ? 'missing' : `of type ${typeof given.approve}`}` : 'an `answer`';
      throw new KlymError(
        'INVALID_ARGUMENT',
        `Task ${id} waits for a decision on ${input.call?.toolName ?? 'a call'}: reply { approve: true | false, reason? }, not ${what}`,
      );
    }
    if (given.reason !== undefined && typeof given.reason !== 'string')
      throw new KlymError('INVALID_ARGUMENT', `Expected \`reason\` to be a string, got ${typeof given.reason}`);
    return { approved: given.approve, ...(given.reason === undefined ? {} : { reason: given.reason }) };
  }
  if (typeof given.answer !== 'string') {
    const what = given.approve === undefined ? `\`answer\` ${given.answer === undefined ? 'missing' : `of type ${typeof given.answer}`}` : 'an approval';
    throw new KlymError('INVALID_ARGUMENT', `Task ${id} waits for an answer to its question: reply { answer: "…" }, not ${what}`);
  }
  return { answer: given.answer };
}
