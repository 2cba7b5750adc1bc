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

/**
 * A log entry that belongs to no step: the task's own notes, the run's start and end, a budget hit, and
 * what upstreams logged (the task log keeps an `upstream-log` as the upstream's entry, without its step).
 */
export interface TimelineNote {
  readonly kind: 'note';
  readonly seq: number;
  readonly time: string;
  readonly type: string;
  readonly data: Readonly<Record<string, unknown>>;
}

/** What a task did, in the order it did it. */
export type TimelineItem = TimelineStep | TimelineNote;

type Mutable<T> = { -readonly [Key in keyof T]: T[Key] };
type StepDraft = Mutable<Omit<TimelineStep, 'tools'>> & { tools: Mutable<TimelineToolCall>[]; llmAt?: number };

const text = (value: unknown): string | undefined => (typeof value === 'string' ? value : undefined);
const number = (value: unknown): number | undefined => (typeof value === 'number' && Number.isFinite(value) ? value : undefined);

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
  const callOf = (draft: StepDraft, data: Readonly<Record<string, unknown>>): Mutable<TimelineToolCall> => {
    const toolCallId = text(data.toolCallId) ?? '';
    let call = draft.tools.find((candidate) => candidate.toolCallId === toolCallId);
    if (call === undefined) {
      call = { toolCallId, toolName: text(data.toolName) ?? '?', args: undefined, outcome: 'running' };
      draft.tools.push(call);
    }
    return call;
  };

  for (const entry of entries) {
    const { data } = entry;
    const step = number(data.step);
    if (step === undefined || !['step-start', 'llm-request', 'llm-response', 'tool-call', 'tool-result', 'tool-error', 'tool-denied', 'step-end'].includes(entry.type)) {
      items.push({ kind: 'note', seq: entry.seq, time: entry.time, type: entry.type, data });
      continue;
    }
    const draft = stepOf(step);
    switch (entry.type) {
      case 'llm-request':
        draft.llmAt = Date.parse(entry.time);
        draft.llm = { ...draft.llm, ...pickNumbers(data, ['messages', 'tools']) };
        break;
      case 'llm-response':
        draft.llm = {
          ...draft.llm,
          ...(draft.llmAt === undefined ? {} : { durationMs: Math.max(0, Date.parse(entry.time) - draft.llmAt) }),
          ...(data.usage === undefined ? {} : { usage: data.usage as AgentUsage }),
          ...(text(data.finishReason) === undefined ? {} : { finishReason: text(data.finishReason) }),
          ...(text(data.text) ? { text: text(data.text) } : {}),
        };
        break;
      case 'tool-call':
        callOf(draft, data).args = data.args;
        break;
      case 'tool-result': {
        const call = callOf(draft, data);
        call.outcome = data.isError === true ? 'error' : 'ok';
        call.durationMs = number(data.durationMs);
        call.preview = text(data.preview);
        break;
      }
      case 'tool-error': {
        const call = callOf(draft, data);
        call.outcome = 'error';
        call.durationMs = number(data.durationMs);
        call.error = `${text(data.code) ?? 'ERROR'}: ${text(data.message) ?? ''}`;
        break;
      }
      case 'tool-denied': {
        const call = callOf(draft, data);
        call.outcome = 'denied';
        call.error = `${text(data.policy) ?? 'policy'}: ${text(data.reason) ?? 'denied'}`;
        break;
      }
      case 'step-end':
        draft.end = { usage: data.usage as AgentUsage, ...(number(data.costUsd) === undefined ? {} : { costUsd: number(data.costUsd) }), elapsedMs: number(data.elapsedMs) ?? 0 };
        break;
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

function pickNumbers(data: Readonly<Record<string, unknown>>, keys: readonly ('messages' | 'tools')[]): Partial<Record<'messages' | 'tools', number>> {
  const picked: Partial<Record<'messages' | 'tools', number>> = {};
  for (const key of keys) {
    const value = number(data[key]);
    if (value !== undefined) picked[key] = value;
  }
  return picked;
}
