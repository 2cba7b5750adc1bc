import type { BudgetHit } from '../agent/budget.ts';
import type { AgentCheckpoint } from '../agent/types.ts';
import type { AgentEvent } from '../agent/agent-event.ts';
import { KlymError, isKlymError } from '../errors.ts';
import { raceAbort } from '../internal/abort.ts';
import { startTaskSpan } from './task-span.ts';
import type { TracingOptions } from '../telemetry/tracing.ts';
import type { RunOutcome, TaskLease } from './queue/task-queue.ts';
import type { AgentRunner } from './task-manager-types.ts';
import { createProgress } from './runner/task-progress.ts';
import { isRunnerLost } from './runner/runner-thread-handle.ts';
import { TASK_DEFAULTS } from '../defaults.ts';
import { answerAsk, INPUT_REQUIRED } from '../agent/ask-caller.ts';
import { decidedWriteBack, isWriteBackApproval, writeBackApproval } from './runner/write-back-approval.ts';
import { completionOf, runOptionsOf } from './runner/task-run.ts';
import { isReplied, isTerminal, type TaskPatch, type TaskRecord } from './store/task-types.ts';
import { taskArtifacts } from './runner/task-artifacts.ts';
import type { TaskQueries } from './runner/task-queries.ts';
import type { DailySpend } from './admission/daily-spend.ts';
import { createTaskEnding, type TaskEnding, type TaskEndingContext } from './task-ending.ts';

/** What running a task needs: the manager's settings, resolved (its ends' included). */
export interface TaskExecutionContext extends TaskEndingContext {
  /** Queues a task again (ahead of its principal's waiting starts): a run whose thread died under it goes on. */
  readonly requeue?: (id: string, principal: string) => Promise<void>;
  readonly run: AgentRunner;
  /** The manager's secrets, provider keys included. */
  readonly secrets: readonly string[];
  readonly taskTimeoutMs: number;
  readonly resumeOnRestart: boolean;
  /** Traces each run of a task; absent when tracing is off. */
  readonly tracing: TracingOptions | undefined;
  /** The tasks' DuckDBs: a run queries its task's there (`klym__query_artifact`), dropped when the run ends. */
  readonly queries?: TaskQueries;
  /** What each principal's runs spend per day: every step and map counted, a run stopped once its principal's day is spent. */
  readonly spend?: DailySpend;
  /** Whether runs are offered `klym__ask_caller` (a task's request may still turn it off). */
  readonly askCaller: boolean;
}

/** Running tasks, and ending them: what the task manager and its queue share. */
export interface TaskExecution extends Pick<TaskEnding, 'log' | 'emit' | 'finish' | 'interrupt' | 'settleWriteBack'> {
  /** Runs one task a queue handed out: see {@link TaskConsumer.run}. Never rejects. */
  run(lease: TaskLease): Promise<RunOutcome>;
}

/** Why a task that was running when its process stopped ends as `TASK_INTERRUPTED` with resuming off. */
export const notResumed = (step: number): string =>
  `Klym stopped while this task was running (after step ${step}); tasks.resumeOnRestart is off, so it was not resumed`;

/** Creates the run-one-task half of a task manager. */
export function createTaskExecution(context: TaskExecutionContext): TaskExecution {
  const { store, redact, defaults } = context;

  const { log, logEvent, emit, finish, interrupt, settleWriteBack, recordResult, park } = createTaskEnding(context);

  /**
   * Takes the task up: `pending` → `running`, resumed from its checkpoint when its caller answered its question;
   * a `running` one (its last run stopped: its process died, or handed it back) is resumed, or ended as
   * `TASK_INTERRUPTED` when resuming is off. Else the outcome of a run that has nothing to do.
   */
  const takeUp = async (id: string): Promise<{ task: TaskRecord; resumed: boolean; answered?: true } | 'ended' | 'left'> => {
    const found = await store.get(id);
    if (found === undefined) return 'ended';
    if (found.status === 'pending') {
      // An answered task goes on where it asked, and keeps the time it first started.
      const answered = isReplied(found.input);
      const patch: TaskPatch = answered
        ? { status: 'running', currentStep: 'resuming' }
        : { status: 'running', startedAt: new Date().toISOString(), currentStep: 'starting' };
      const started = await store.transition(id, ['pending'], patch);
      if (started !== undefined) return answered ? { task: started, resumed: true, answered } : { task: started, resumed: false };
      return takeUp(id);
    }
    if (isTerminal(found.status)) {
      // Its run ended it but the process stopped before the queue heard, perhaps while writing the result.
      await settleWriteBack(found);
      return 'ended';
    }
    // Waiting for its caller: nothing to run until the answer queues it again.
    if (found.status === 'input_required') return 'ended';
    if (found.status !== 'running') return 'left';
    if (!context.resumeOnRestart) {
      await interrupt(id, notResumed);
      return 'ended';
    }
    // A resumed task keeps the time it first started.
    const resumed = await store.transition(id, ['running'], { currentStep: 'resuming' });
    return resumed === undefined ? 'ended' : { task: resumed, resumed: true };
  };

  /**
   * The checkpoint an answered task resumes from: its ask's result the answer, saved before the run goes on, so
   * that the answer is in the checkpoint whichever process took the task up. `null` when the checkpoint has no
   * such question (the task is then ended as `error`). A task resumed after a restart (`fromAnswer` false) gets the
   * answer too when its checkpoint still holds the ask unanswered (its process stopped before saving it).
   */
  const withAnswer = async (task: TaskRecord, checkpoint: AgentCheckpoint | undefined, fromAnswer: boolean): Promise<AgentCheckpoint | undefined | null> => {
    const { input } = task;
    if (input === undefined || !isReplied(input)) return checkpoint;
    const reply =
      input.answer === undefined
        ? { approved: input.approved === true, ...(input.reason === undefined ? {} : { reason: input.reason }) }
        : { answer: input.answer };
    const answered = checkpoint === undefined ? undefined : answerAsk(checkpoint, input.toolCallId, reply);
    if (answered === undefined && !fromAnswer) return checkpoint;
    if (answered === undefined) {
      const message = `Task ${task.id} was answered, but its checkpoint holds no ${input.kind === 'approval' ? 'call' : 'question'} ${input.toolCallId} to answer; it cannot go on`;
      await finish(task.id, ['running'], { status: 'error', currentStep: 'failed', error: { code: 'INTERNAL', message } });
      return null;
    }
    if (answered !== checkpoint) await store.saveCheckpoint(task.id, answered);
    return answered;
  };

  /** Whether a task whose runner thread died under it goes on: resuming is on, and it has not resumed too often. */
  const canGoOn = (task: TaskRecord, resumed: boolean): boolean =>
    context.resumeOnRestart && context.requeue !== undefined && (task.resumes?.length ?? 0) + (resumed ? 1 : 0) < TASK_DEFAULTS.maxRunnerResumes;

  const execute = async (lease: TaskLease): Promise<RunOutcome> => {
    const { id } = lease;
    const taken = await takeUp(id);
    if (typeof taken === 'string') return taken;
    const { task, resumed } = taken;
    const fromAnswer = taken.answered === true;
    if (fromAnswer && isWriteBackApproval(task.input)) {
      // The run was done: its result is written (or not) as its caller decided.
      const done = await finish(id, ['running'], decidedWriteBack(task));
      if (done?.writeBack?.status === 'pending') await recordResult(done, undefined);
      else if (done?.writeBack !== undefined) log(id, 'write-back', { ...done.writeBack });
      return 'ended';
    }
    // A principal whose day is spent runs nothing more today: a task that never ran ends unstarted, a resumed one stops as its budget would.
    const budget = new AbortController();
    const meter = await context.spend?.meter(task.principal);
    if (meter?.reached !== undefined && !resumed) {
      const refused = context.spend?.refusal(task.principal, meter.reached, `task ${id} was not started`);
      await finish(id, ['running'], { status: 'error', currentStep: 'quota', error: { code: 'QUOTA_EXCEEDED', message: refused?.message ?? '' } });
      return 'ended';
    }
    const stopFor = (hit: BudgetHit | undefined | false): void => {
      if (hit && !budget.signal.aborted) budget.abort(hit);
    };
    stopFor(meter?.reached);
    const checkpoint = resumed ? await withAnswer(task, await store.loadCheckpoint(id), fromAnswer) : undefined;
    if (checkpoint === null) return 'ended';
    const spentMs = checkpoint?.elapsedMs ?? 0;
    if (resumed) {
      const fromStep = checkpoint?.steps ?? 0;
      await store.update(id, { resumes: [...(task.resumes ?? []), fromStep] });
      log(id, 'task-resume', {
        fromStep,
        interruptedCalls: checkpoint?.current?.calls.filter((call) => call.output === undefined).map((call) => call.toolName) ?? [],
      });
      emit({ type: 'task-resume', task });
      context.announce('task-resume', id);
    } else {
      emit({ type: 'task-start', task });
      context.announce('task-start', id);
      log(id, 'task-start', { model: task.request.model ?? defaults.model ?? 'default' });
    }
    const asking = context.askCaller && task.request.askCaller !== false;
    let parked = false;
    // Its runner thread died under it: queued again once this run has let go of the task.
    let lost = false;
    // The run's own signal: the lease's (cancel, release) and the task's time limit.
    const controller = new AbortController();
    const onLeaseAbort = (): void => controller.abort(lease.signal.reason);
    if (lease.signal.aborted) onLeaseAbort();
    lease.signal.addEventListener('abort', onLeaseAbort, { once: true });
    // The limit counts run time across restarts, as the run's own budgets do.
    const leftMs = Math.max(0, context.taskTimeoutMs - spentMs);
    const timer = setTimeout(
      () => controller.abort(new KlymError('TASK_TIMEOUT', `Task ${id} ran past its run-time limit of ${context.taskTimeoutMs} ms`)),
      leftMs,
    );
    const progress = createProgress(store, task);
    // A step-end's cost is the run's so far, a resumed task's earlier steps included: a step's own is the difference.
    let costSoFar = task.usage.costUsd ?? 0;
    const spend = (tokens: number, usd: number): void => stopFor(meter?.add({ tokens, usd }, stopFor));
    const beforeStep = meter?.limited === true ? meter.settled : undefined;
    const onEvent = (event: AgentEvent): void => {
      // What a run spends counts against its principal's day, whoever holds the task now.
      if (event.type === 'artifact-map') spend(event.usage.totalTokens, 0);
      // A program's sub-calls too (a replayed call's were counted when they were made).
      if (event.type === 'code-call' && event.usage !== undefined && event.replayed !== true) spend(event.usage.totalTokens, 0);
      // A released run's task is someone else's now: what it still reports is not the task's.
      if (lease.released()) return;
      try {
        logEvent(id, event);
        // Events after a cancel or timeout are logged, but the task's step and usage stay as they ended.
        if (!controller.signal.aborted) progress.apply(event);
        if (event.type === 'step-end') {
          const costUsd = event.costUsd === undefined ? undefined : Math.max(0, event.costUsd - costSoFar);
          costSoFar = event.costUsd ?? costSoFar;
          // A step's cost includes the maps it ran (their tokens were counted as each ended).
          spend(event.usage.totalTokens, costUsd ?? 0);
          // Its tokens were spent whether or not the task was cancelled meanwhile.
          emit({ type: 'task-step', task, step: event.step, usage: event.usage, costUsd });
        }
      } catch {
        // A malformed event must not break the run.
      }
    };
    const onCheckpoint = (saved: AgentCheckpoint): void | Promise<void> => {
      // Refused, so that a call the released run would still send is not sent: the next run owns the checkpoint.
      if (lease.released()) return Promise.reject(new KlymError('ABORTED', `Task ${id} was handed on; this run records nothing more`));
      const stored = store.saveCheckpoint(id, saved);
      if (saved.current === undefined) progress.note({ elapsedMs: saved.elapsedMs });
      return stored;
    };
    // The task's own sessions of `task`-scoped upstreams: closed in `finally`, on cancel, timeout and release too.
    const scope = context.pool.openScope(id);
    const span = context.tracing === undefined ? undefined : startTaskSpan(context.tracing, task, resumed, redact.text);
    const tracing = span === undefined ? undefined : { ...context.tracing, ...(span.carrier === undefined ? {} : { parent: span.carrier }) };
    // Kept in the task's store: a resumed run, or a worker that took the task over, reads them again.
    const artifacts = taskArtifacts(store, id, context.queries, controller.signal);
    const runOptions = runOptionsOf(task, {
      pool: context.pool,
      scope,
      artifacts,
      defaults,
      secrets: context.secrets,
      taskTimeoutMs: context.taskTimeoutMs,
      signal: controller.signal,
      budgetSignal: budget.signal,
      beforeStep,
      onEvent,
      onCheckpoint,
      checkpoint,
      tracing,
      askCaller: asking,
    });
    try {
      const result = await raceAbort(
        Promise.resolve().then(() => context.run(runOptions)),
        controller.signal,
      ).finally(progress.save);
      if (result.finishReason === 'cancelled' || controller.signal.aborted)
        throw controller.signal.reason ?? new KlymError('ABORTED', `Task ${id} was cancelled`);
      if (!(await lease.holds())) return 'left';
      const record = task.request.recordResult ?? context.writeBack.byDefault;
      const approval = record ? writeBackApproval(task, result.finalText, { defaults, writeBack: context.writeBack }) : undefined;
      if (result.finishReason === INPUT_REQUIRED && result.asked !== undefined) {
        parked = await park(task, result, checkpoint, result.asked);
      } else if (approval !== undefined) {
        parked = await park(task, result, checkpoint, approval);
      } else {
        const done = await finish(id, ['running'], completionOf(task, result, { checkpoint, writeBack: record, redact }));
        if (done !== undefined && record) await recordResult(done, span?.toolCalls);
      }
    } catch (error) {
      // Released: the task stays `running` with its checkpoint, for the run that takes it up next.
      if (lease.released()) return 'left';
      const reason: unknown = controller.signal.aborted ? controller.signal.reason : error;
      if (isKlymError(reason, 'TASK_TIMEOUT')) {
        if (!(await lease.holds())) return 'left';
        await finish(id, ['running'], { status: 'error', currentStep: 'timed out', error: { code: 'TASK_TIMEOUT', message: reason.message } });
      } else if (!controller.signal.aborted && isRunnerLost(error) && canGoOn(task, resumed)) {
        // Nothing of its own went wrong: it stays `running` with its checkpoint and goes on on a fresh thread, as after a crash.
        if (!(await lease.holds())) return 'left';
        lost = true;
      } else if (!controller.signal.aborted) {
        if (!(await lease.holds())) return 'left';
        const goneOn = (task.resumes?.length ?? 0) + (resumed ? 1 : 0);
        const lostTooOften = isRunnerLost(error) && context.resumeOnRestart && context.requeue !== undefined;
        const code = isKlymError(error) ? error.code : 'INTERNAL';
        const said = error instanceof Error ? error.message : String(error);
        const message = lostTooOften
          ? `${said}; the task was resumed ${goneOn} times already (at most ${TASK_DEFAULTS.maxRunnerResumes}), and is not resumed again`
          : said;
        await finish(id, ['running'], { status: 'error', currentStep: 'failed', error: { code, message: redact.text(message) } });
      }
      // Aborted by a cancel: the cancel already made the task `cancelled`.
    } finally {
      clearTimeout(timer);
      lease.signal.removeEventListener('abort', onLeaseAbort);
      // A run that ignored its abort still has its calls cut here: the scope aborts what it has in flight.
      await scope.close();
      // The run's tables go with its DuckDB; a follow-up query (`query_task_artifact`) opens it again.
      await context.queries?.release(id).catch(() => {});
      if (span !== undefined) span.end(await store.get(id).catch(() => undefined));
    }
    if (lost) {
      await context.requeue?.(id, task.principal);
      return 'left';
    }
    // Answered while this run was ending: a shared queue's add was a no-op for the job still held here.
    if (parked && (await store.get(id).catch(() => undefined))?.status === 'pending') return 'left';
    return 'ended';
  };

  return {
    log,
    emit,
    finish,
    // A store that failed leaves the task as it was, for a later run to take up.
    run: (lease) => execute(lease).catch((): RunOutcome => 'left'),
    interrupt,
    settleWriteBack,
  };
}
