// How a task's run ends on its record: its status and `task-end` entry and event, a question parked, its result written back.
import type { AgentEvent } from '../agent/agent-event.ts';
import type { AskedQuestion } from '../agent/ask-caller.ts';
import type { AgentCheckpoint, AgentRunResult } from '../agent/types.ts';
import type { SessionPool } from '../pool/session-pool.ts';
import type { Redactor } from '../redact.ts';
import type { ToolCallTracing } from '../telemetry/tool-call-span.ts';
import type { AnnouncedEvent } from './queue/task-queue.ts';
import { eventData } from './runner/task-progress.ts';
import { completionOf, type TaskRunDefaults } from './runner/task-run.ts';
import { WRITE_BACK_CALL_ID } from './runner/write-back-approval.ts';
import { writeBackResult, type ResolvedWriteBack } from './runner/write-back.ts';
import type { TaskLogData, TaskNoteType } from './store/log-entry.ts';
import { isReplied, KEPT_INPUTS, type TaskPatch, type TaskRecord, type TaskStatus, type TaskStore } from './store/task-types.ts';
import type { TaskEvent } from './task-manager-types.ts';

/** What ending a task needs of the manager's settings, resolved. */
export interface TaskEndingContext {
  readonly store: TaskStore;
  readonly pool: SessionPool;
  /** The runner's events come redacted already (core's runners): logged as they come. */
  readonly eventsRedacted: boolean;
  readonly defaults: TaskRunDefaults;
  readonly redact: Redactor;
  readonly writeBack: ResolvedWriteBack;
  readonly onEvent: ((event: TaskEvent) => void) | undefined;
  /** Tells the other processes of a shared queue that a task started, resumed or ended here. */
  readonly announce: (type: AnnouncedEvent, id: string) => void;
  /** The manager's clock, in ms since the epoch: when a question was asked. */
  readonly now: () => number;
}

/** A task's log and events, and the ends its run comes to. */
export interface TaskEnding {
  /** Appends to a task's log, redacted. */
  log<Type extends TaskNoteType>(id: string, type: Type, data: TaskLogData<Type>): void;
  /** Appends a run's event to its task's log, redacted unless the runner did it. */
  logEvent(id: string, event: AgentEvent): void;
  /** Tells the manager's listener; a listener that throws breaks nothing. */
  emit(event: TaskEvent): void;
  /** Ends a task if its status is one of `from`: the transition, its `task-end` entry and event. */
  finish(id: string, from: readonly TaskStatus[], patch: TaskPatch): Promise<TaskRecord | undefined>;
  /** Ends a `running` task as `TASK_INTERRUPTED`, with a message saying why, given the step its checkpoint reached. */
  interrupt(id: string, why: (step: number) => string): Promise<void>;
  /** Reports a write-back a stopped process left under way as of unknown outcome; it is never made twice. */
  settleWriteBack(task: TaskRecord): Promise<void>;
  /** Writes a finished task's result into the graph, and records how it went. */
  recordResult(task: TaskRecord, tracing: ToolCallTracing | undefined): Promise<void>;
  /** Parks a run that asked its caller: `running` → `input_required`; false when the task was no longer `running`. */
  park(task: TaskRecord, result: AgentRunResult, checkpoint: AgentCheckpoint | undefined, asked: AskedQuestion): Promise<boolean>;
}

/** Creates the ends of a task manager's runs, over its store. */
export function createTaskEnding(context: TaskEndingContext): TaskEnding {
  const { store, redact, defaults } = context;

  const emit = (event: TaskEvent): void => {
    try {
      context.onEvent?.(event);
    } catch {
      // A listener's failure must not break a task.
    }
  };
  const log = <Type extends TaskNoteType>(id: string, type: Type, data: TaskLogData<Type>): void => store.appendLog(id, type, redact.value(data));
  const logEvent = (id: string, event: AgentEvent): void => {
    const data = eventData(event);
    store.appendLog(id, event.type, context.eventsRedacted ? data : redact.value(data));
  };

  const finish = async (id: string, from: readonly TaskStatus[], patch: TaskPatch): Promise<TaskRecord | undefined> => {
    const task = await store.transition(id, from, { ...patch, finishedAt: new Date().toISOString() });
    if (task !== undefined) {
      log(id, 'task-end', { status: task.status, ...(task.error ? { error: task.error } : {}), ...(task.cancelReason ? { reason: task.cancelReason } : {}) });
      emit({ type: 'task-end', task });
      context.announce('task-end', id);
    }
    return task;
  };

  const interrupt = async (id: string, why: (step: number) => string): Promise<void> => {
    const step = (await store.loadCheckpoint(id))?.steps ?? 0;
    await finish(id, ['running'], { status: 'error', currentStep: 'interrupted', error: { code: 'TASK_INTERRUPTED', message: why(step) } });
  };

  const settleWriteBack = async (task: TaskRecord): Promise<void> => {
    if (task.writeBack?.status !== 'pending') return;
    const error = `Klym stopped while writing the result: the node ${task.writeBack.nodeId} may or may not have been written; it was not written again`;
    await store.update(task.id, { writeBack: { ...task.writeBack, status: 'failed', error } });
    log(task.id, 'write-back', { status: 'failed', nodeId: task.writeBack.nodeId, error });
  };

  const recordResult = async (task: TaskRecord, tracing: ToolCallTracing | undefined): Promise<void> => {
    const text = task.result?.finalText ?? '';
    const provenance = {
      prompt: redact.text(task.request.prompt),
      model: task.result?.model ?? task.request.model ?? defaults.model ?? 'unknown',
      principal: task.principal,
      finishReason: task.result?.finishReason ?? 'unknown',
    };
    const outcome = await writeBackResult(
      context.pool,
      { id: task.id, text, time: new Date(task.finishedAt ?? Date.now()), provenance },
      context.writeBack,
      tracing,
    );
    const updated = await store.update(task.id, { writeBack: outcome.error === undefined ? outcome : { ...outcome, error: redact.text(outcome.error) } });
    log(task.id, 'write-back', { ...outcome });
    if (updated !== undefined) emit({ type: 'task-write-back', task: updated });
  };

  /**
   * A run that asked its caller (or whose result's write-back waits for approval, `result` then kept): `running` →
   * `input_required` with what it asks; its slot and sessions are let go as any run's end.
   */
  const park = async (task: TaskRecord, result: AgentRunResult, checkpoint: AgentCheckpoint | undefined, asked: AskedQuestion): Promise<boolean> => {
    const completed = completionOf(task, result, { checkpoint, writeBack: false, redact });
    const waiting = await store.transition(task.id, ['running'], {
      usage: completed.usage,
      elapsedMs: completed.elapsedMs,
      ...(asked.toolCallId === WRITE_BACK_CALL_ID ? { result: completed.result } : {}),
      // The question answered before this one stays in the task's history.
      ...(task.input !== undefined && isReplied(task.input) ? { earlierInputs: [...(task.earlierInputs ?? []), task.input].slice(-KEPT_INPUTS) } : {}),
      status: 'input_required',
      currentStep: asked.kind === 'approval' ? 'waiting for approval' : 'waiting for input',
      input: {
        ...(asked.kind === 'approval' ? { kind: 'approval' } : {}),
        question: redact.text(asked.question),
        ...(asked.call === undefined ? {} : { call: { toolName: asked.call.toolName, input: redact.value(asked.call.input) } }),
        toolCallId: asked.toolCallId,
        askedAt: new Date(context.now()).toISOString(),
      },
    });
    if (waiting === undefined) return false;
    log(task.id, 'input-required', {
      question: asked.question,
      toolCallId: asked.toolCallId,
      ...(asked.call === undefined ? {} : { toolName: asked.call.toolName }),
    });
    emit({ type: 'task-input-required', task: waiting });
    return true;
  };

  return { log, logEvent, emit, finish, interrupt, settleWriteBack, recordResult, park };
}
