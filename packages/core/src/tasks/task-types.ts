import type { AgentBudget, ToolSelection } from '../agent/types.ts';
import type { KlymErrorCode } from '../errors.ts';
import type { TaskLogPage } from './task-log.ts';

/**
 * Where a task is. `pending`: queued behind the concurrency limit; `running`; and the terminal ones,
 * which never change: `completed` (also when a budget ended the run), `error`, `cancelled`.
 */
export type TaskStatus = 'pending' | 'running' | 'completed' | 'error' | 'cancelled';

/** The statuses a task never leaves. */
export const TERMINAL_STATUSES: readonly TaskStatus[] = ['completed', 'error', 'cancelled'];

/** Whether `status` is terminal. */
export const isTerminal = (status: TaskStatus): boolean => TERMINAL_STATUSES.includes(status);

/** What a caller asks a task to do. Already checked against the server's limits by whoever builds it. */
export interface TaskRequest {
  readonly prompt: string;
  readonly systemPrompt?: string;
  /** A configured model name. @default the manager's `defaults.model` */
  readonly model?: string;
  readonly tools?: ToolSelection;
  readonly budget?: AgentBudget;
  /** Write the result into the graph at the end. @default the manager's `writeBack.byDefault` */
  readonly recordResult?: boolean;
}

/** Budget use of a task so far. */
export interface TaskUsage {
  readonly steps: number;
  readonly inputTokens: number;
  readonly outputTokens: number;
  readonly totalTokens: number;
  /** `undefined` while the model has no price. */
  readonly costUsd: number | undefined;
}

/** The outcome of writing a task's result into the graph. */
export interface WriteBackOutcome {
  /** `pending` while the write is under way. */
  readonly status: 'pending' | 'written' | 'failed';
  /** The node's id, `klym_<task_id>`. */
  readonly nodeId: string;
  readonly dayId: string;
  /** Why it failed: grynya's `message`, or the call's error. */
  readonly error?: string;
}

/** What a task ended with when it completed. */
export interface TaskResult {
  readonly text: string;
  /** `stop`, …, or `budget:<steps|tokens|cost|time>`. */
  readonly finishReason: string;
  readonly model: string;
  readonly toolCalls: number;
}

/** A task as the store keeps it and callers see it: plain data, never a secret. */
export interface TaskRecord {
  readonly id: string;
  /** Who started it; only they can see, read or cancel it. */
  readonly principal: string;
  readonly request: TaskRequest;
  readonly status: TaskStatus;
  /** ISO 8601 timestamps. */
  readonly createdAt: string;
  readonly startedAt?: string;
  readonly finishedAt?: string;
  /** What the task is doing now, in a few words (`step 3: calling grynya__query_graph`). */
  readonly currentStep: string;
  readonly usage: TaskUsage;
  readonly result?: TaskResult;
  readonly error?: { readonly code: KlymErrorCode; readonly message: string };
  /** Why it was cancelled (`cancelled by caller`, `shutdown`). */
  readonly cancelReason?: string;
  readonly writeBack?: WriteBackOutcome;
}

/** A change to a task's fields other than its identity. */
export type TaskPatch = Partial<Omit<TaskRecord, 'id' | 'principal' | 'request' | 'createdAt'>>;

/** What a store's `list` filters by. */
export interface TaskFilter {
  readonly principal?: string;
  readonly status?: TaskStatus;
}

/**
 * Where tasks are kept. The in-memory store is the default; a durable or shared store implements the
 * same interface. Status changes go through `transition`, which must be atomic: of many concurrent
 * transitions out of one status, exactly one applies.
 */
export interface TaskStore {
  insert(task: TaskRecord): Promise<void>;
  get(id: string): Promise<TaskRecord | undefined>;
  /** Applies `patch` only if the task's status is one of `from`; resolves the updated task, or `undefined` when it did not apply. */
  transition(id: string, from: readonly TaskStatus[], patch: TaskPatch): Promise<TaskRecord | undefined>;
  /** Applies `patch` to a task whatever its status, but never changes `status`. */
  update(id: string, patch: Omit<TaskPatch, 'status'>): Promise<TaskRecord | undefined>;
  /** Newest first. */
  list(filter?: TaskFilter): Promise<readonly TaskRecord[]>;
  delete(id: string): Promise<void>;
  /** Appends to the task's log (fire and forget: a store that writes elsewhere buffers). */
  appendLog(id: string, type: string, data: Readonly<Record<string, unknown>>): void;
  readLog(id: string, after?: number, limit?: number): Promise<TaskLogPage>;
  tailLog(id: string, count: number): Promise<TaskLogPage>;
}
