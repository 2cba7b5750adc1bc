import type { AgentEvent } from '../../agent/agent-event.ts';
import type { OutboxEventType } from '../../webhooks/webhook-types.ts';
import type { TaskRecord, TaskStatus, WriteBackOutcome } from './task-types.ts';

/** An agent event's fields as its log entry's `data`: the event without its `type`; an `upstream-log` is the upstream's entry. */
export type AgentEventData<Event extends AgentEvent> = Event extends { readonly type: 'upstream-log' } ? Event['entry'] : Omit<Event, 'type'>;

/** The task's own entries, which no agent event makes: the data of each, by its `type`. */
export interface TaskNoteData {
  readonly 'task-create': { readonly model: string; readonly recordResult: boolean };
  readonly 'task-start': { readonly model: string };
  /** A restarted process took the task up again after step `fromStep`; `interruptedCalls` names the calls whose outcome is unknown. */
  readonly 'task-resume': { readonly fromStep: number; readonly interruptedCalls: readonly string[] };
  /** The run asked its caller `question` (`klym__ask_caller`) and the task waits for the answer. */
  /** The run waits for its caller: a question, or (with `toolName`) the approval of that call. */
  readonly 'input-required': { readonly question: string; readonly toolCallId: string; readonly toolName?: string };
  /** The caller answered (`chars` long) or decided (`approved`); the task is queued to go on from its checkpoint. */
  readonly 'input-answered': { readonly toolCallId: string; readonly chars?: number; readonly approved?: boolean };
  readonly 'task-end': { readonly status: TaskStatus; readonly error?: NonNullable<TaskRecord['error']>; readonly reason?: string };
  /** The write-back's outcome; one a stopped process left under way is told without its `dayId`. */
  readonly 'write-back': Omit<WriteBackOutcome, 'dayId'> & { readonly dayId?: string };
  readonly 'webhook-delivery': {
    readonly endpoint: string;
    readonly event: OutboxEventType;
    readonly attempt: number;
    readonly outcome: 'delivered' | 'retrying' | 'gave_up';
    /** The receiver's HTTP status, when it answered. */
    readonly status?: number;
    readonly error?: string;
    readonly retriedForMs?: number;
    readonly nextAttemptAt?: string;
    readonly webhookId: string;
  };
}

/** The `type` of a task's own entries. */
export type TaskNoteType = keyof TaskNoteData;

/** The data of every kind of log entry, by `type`: each agent event's (derived from {@link AgentEvent}) and the task's notes. */
export type TaskLogDataByType = { readonly [Event in AgentEvent as Event['type']]: AgentEventData<Event> } & TaskNoteData;

/** The `type` of an entry a task's log is written with. */
export type TaskLogType = keyof TaskLogDataByType;

/** What `type`'s entry is written with. */
export type TaskLogData<Type extends TaskLogType> = TaskLogDataByType[Type];

/** How an array a log entry cut ends: how many items it left out (past 20). */
export type LogListRest = `… ${number} more`;

/**
 * A value as a log entry keeps it: as written, except that an array of more than 20 items keeps 20 and
 * ends with a {@link LogListRest}, and a long string is cut (it stays a string). Only `unknown` fields
 * (a tool call's `args`) nest deep enough to be cut to `…`.
 */
export type Logged<Value> = Value extends readonly (infer Item)[]
  ? readonly (Logged<Item> | LogListRest)[]
  : Value extends object
    ? { readonly [Key in keyof Value]: Logged<Value[Key]> }
    : Value;

/** One numbered entry of a task's log, of one `type`. */
export interface TaskLogEntryOf<Type extends string, Data> {
  /** Counts up from 1 per task; never reused, so it is a stable cursor. */
  readonly seq: number;
  /** ISO 8601. */
  readonly time: string;
  readonly type: Type;
  /** What the entry was written with; long strings are cut (`…`) so one entry stays within `maxEntryBytes`. */
  readonly data: Data;
}

/**
 * An entry a store holds that this version does not know: a `type` it never writes, or data that is not an
 * object (another version wrote it, or the store was changed by hand). Kept so that nothing a log holds
 * goes unseen: `storedType` and `storedData` are what was read.
 */
export type UnknownLogEntry = TaskLogEntryOf<'unknown-entry', { readonly storedType: string; readonly storedData: unknown }>;

/**
 * One numbered entry of a task's log: an agent event (`type` is the event's type, `data` its other
 * fields) or a task's note, discriminated by `type`.
 */
export type TaskLogEntry = { readonly [Type in TaskLogType]: TaskLogEntryOf<Type, Logged<TaskLogData<Type>>> }[TaskLogType] | UnknownLogEntry;

/** Every type this version writes: `satisfies` keeps the list and {@link TaskLogType} the same. */
const LOG_TYPES = new Set(
  Object.keys({
    'run-start': true,
    'step-start': true,
    'llm-request': true,
    'llm-response': true,
    'tool-call': true,
    'tool-result': true,
    'tool-error': true,
    'tool-denied': true,
    'orphan-removed': true,
    'artifact-kept': true,
    'artifact-map': true,
    'artifact-query': true,
    'code-start': true,
    'code-call': true,
    'code-log': true,
    'code-end': true,
    'history-compacted': true,
    'context-shrunk': true,
    'step-end': true,
    budget: true,
    'upstream-log': true,
    'run-end': true,
    'task-create': true,
    'task-start': true,
    'task-resume': true,
    'input-required': true,
    'input-answered': true,
    'task-end': true,
    'write-back': true,
    'webhook-delivery': true,
  } satisfies Record<TaskLogType, true>),
);

/** An entry as a store reads it back, before {@link readLogEntry} has looked at its `type` and `data`. */
export interface StoredLogEntry {
  readonly seq: number;
  readonly time: string;
  readonly type: string;
  readonly data: unknown;
}

/**
 * A stored entry as a {@link TaskLogEntry}: where the stores that keep entries as JSON (SQLite, Redis) read
 * them back. The data of a known `type` is the JSON of what `appendLog` was given, which its type
 * checked: it is taken as that type's. Anything else is an {@link UnknownLogEntry}.
 */
export function readLogEntry(stored: StoredLogEntry): TaskLogEntry {
  const { seq, time, type, data } = stored;
  if (LOG_TYPES.has(type) && typeof data === 'object' && data !== null && !Array.isArray(data)) return { seq, time, type, data } as TaskLogEntry;
  return { seq, time, type: 'unknown-entry', data: { storedType: type, storedData: data } };
}
