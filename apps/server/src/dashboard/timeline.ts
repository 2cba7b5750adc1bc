import type { AgentUsage, TaskLogEntry } from '@klym/core';

/** The model's part of a step: from its `llm-request` to its `llm-response`. */
export interface TimelineLlmCall {
  /** Messages and tools sent. */
  readonly messages?: number;
  readonly tools?: number;
  /** Absent while the model has not answered. */
  readonly durationMs?: number;
  readonly usage?: AgentUsage;
  readonly finishReason?: string;
  readonly text?: string;
}

/** One tool call of a step, from its `tool-call` to its result, error or denial. */
export interface TimelineToolCall {
  readonly toolCallId: string;
  readonly toolName: string;
  readonly args: unknown;
  /** `running` while no outcome is logged (or the outcome's entry was dropped from a bounded log). */
  readonly outcome: 'running' | 'ok' | 'error' | 'denied';
  readonly durationMs?: number;
  /** The result's start as the model read it (`ok`, and an upstream's `isError` answer, which is `error`). */
  readonly preview?: string;
  /** Why it failed (`CODE: message`) or was denied (`policy: reason`). */
  readonly error?: string;
}

/** One step of the run, as its log entries tell it. */
export interface TimelineStep {
  readonly kind: 'step';
  readonly step: number;
  readonly llm?: TimelineLlmCall;
  readonly tools: readonly TimelineToolCall[];
  /** From `step-end`: the run's use so far; absent while the step runs. */
  readonly end?: { readonly usage: AgentUsage; readonly costUsd?: number; readonly elapsedMs: number };
}

/** The entries a step is built from; every other entry is a {@link TimelineNote}. */
const STEP_TYPES = ['step-start', 'llm-request', 'llm-response', 'tool-call', 'tool-result', 'tool-error', 'tool-denied', 'step-end'] as const;
type StepEntry = Extract<TaskLogEntry, { readonly type: (typeof STEP_TYPES)[number] }>;

/**
 * A log entry that belongs to no step: the task's own notes, the run's start and end, a budget hit, and
 * what upstreams logged (the task log keeps an `upstream-log` as the upstream's entry, without its step).
 */
export type TimelineNote = { readonly kind: 'note' } & Exclude<TaskLogEntry, StepEntry>;

/** What a task did, in the order it did it. */
export type TimelineItem = TimelineStep | TimelineNote;

type Mutable<T> = { -readonly [Key in keyof T]: T[Key] };
type StepDraft = Mutable<Omit<TimelineStep, 'tools'>> & { tools: Mutable<TimelineToolCall>[]; llmAt?: number };

const isStepEntry = (entry: TaskLogEntry): entry is StepEntry => (STEP_TYPES as readonly string[]).includes(entry.type);

/**
 * Groups a task's log entries (the agent's events and the task's own `task-*` notes, oldest first) into
 * steps: each step's LLM call with its tokens and duration (between `llm-request` and `llm-response`, by
 * the entries' times) and its tool calls with their outcomes. Entries of no step stay notes in place. A bounded log may have dropped older entries: a step is built from what is left.
 */
export function buildTimeline(entries: readonly TaskLogEntry[]): TimelineItem[] {
  const items: TimelineItem[] = [];
  const steps = new Map<number, StepDraft>();
  const stepOf = (step: number): StepDraft => {
    let draft = steps.get(step);
    if (draft === undefined) {
      draft = { kind: 'step', step, tools: [] };
      steps.set(step, draft);
      items.push(draft);
    }
    return draft;
  };
  const callOf = (draft: StepDraft, data: { readonly toolCallId: string; readonly toolName: string }): Mutable<TimelineToolCall> => {
    let call = draft.tools.find((candidate) => candidate.toolCallId === data.toolCallId);
    if (call === undefined) {
      call = { toolCallId: data.toolCallId, toolName: data.toolName, args: undefined, outcome: 'running' };
      draft.tools.push(call);
    }
    return call;
  };

  for (const entry of entries) {
    if (!isStepEntry(entry)) {
      items.push({ kind: 'note', ...entry });
      continue;
    }
    const draft = stepOf(entry.data.step);
    switch (entry.type) {
      case 'llm-request':
        draft.llmAt = Date.parse(entry.time);
        draft.llm = { ...draft.llm, messages: entry.data.messages, tools: entry.data.tools };
        break;
      case 'llm-response':
        draft.llm = {
          ...draft.llm,
          ...(draft.llmAt === undefined ? {} : { durationMs: Math.max(0, Date.parse(entry.time) - draft.llmAt) }),
          usage: entry.data.usage,
          finishReason: entry.data.finishReason,
          ...(entry.data.text ? { text: entry.data.text } : {}),
        };
        break;
      case 'tool-call':
        callOf(draft, entry.data).args = entry.data.args;
        break;
      case 'tool-result': {
        const call = callOf(draft, entry.data);
        call.outcome = entry.data.isError ? 'error' : 'ok';
        call.durationMs = entry.data.durationMs;
        call.preview = entry.data.preview;
        break;
      }
      case 'tool-error': {
        const call = callOf(draft, entry.data);
        call.outcome = 'error';
        call.durationMs = entry.data.durationMs;
        call.error = `${entry.data.code}: ${entry.data.message}`;
        break;
      }
      case 'tool-denied': {
        const call = callOf(draft, entry.data);
        call.outcome = 'denied';
        call.error = `${entry.data.policy}: ${entry.data.reason}`;
        break;
      }
      case 'step-end': {
        const { usage, costUsd, elapsedMs } = entry.data;
        draft.end = { usage, ...(costUsd === undefined ? {} : { costUsd }), elapsedMs };
        break;
      }
      default:
        break;
    }
  }
  return items.map((item) => {
    if (item.kind === 'note') return item;
    const { llmAt: _llmAt, ...step } = item as StepDraft;
    return step;
  });
}
