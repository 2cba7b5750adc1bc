import type { AgentBudget, AgentCheckpoint, AgentUsage, ToolSelection } from '../../agent/types.ts';
import type { KlymErrorCode } from '../../errors.ts';
import type { AccessRules } from '../../tools/tool-policy.ts';
import type { TraceCarrier } from '../../telemetry/trace-context.ts';
import type { PushTarget } from '../../webhooks/push-types.ts';
import type { WebhookOutbox } from '../../webhooks/webhook-types.ts';
import type { TaskLogData, TaskLogType } from './log-entry.ts';
import type { TaskLogPage } from './task-log.ts';
import type { ArtifactInfo, StoredArtifact } from '../../artifacts/artifact-types.ts';

/**
 * Where a task is. `pending`: queued behind the concurrency limit; `running`; `input_required`: its run asked
 * the caller a question (`input`) and waits for the answer, holding no runner slot; and the terminal ones,
 * which never change: `completed` (also when a budget ended the run), `error`, `cancelled`.
 */
export type TaskStatus = 'pending' | 'running' | 'input_required' | 'completed' | 'error' | 'cancelled';

/** Every status, in the order a task may pass them. */
export const TASK_STATUSES = ['pending', 'running', 'input_required', 'completed', 'error', 'cancelled'] as const satisfies readonly TaskStatus[];

/** The statuses of a task not yet ended. */
export const UNFINISHED_STATUSES: readonly TaskStatus[] = ['pending', 'running', 'input_required'];

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
  /** The name of a configured webhook endpoint to tell of this task's events (never a URL). @default none */
  readonly webhook?: string;
  /**
   * The caller's key for this start: another start by the same principal with the same key answers the
   * existing task (whatever its status, across restarts, until it is evicted) instead of starting one.
   */
  readonly idempotencyKey?: string;
  /** `false`: the model is not offered `klym__ask_caller`. @default the manager's `askCaller` (on) */
  readonly askCaller?: boolean;
}

/**
 * What a task's run waits for from its caller: a question (`klym__ask_caller`) or an approval of one tool call
 * (a tool matching `tools.approval`, or the write-back into the graph), and the reply once given.
 */
export interface TaskInput {
  /** `question`: any text answers it; `approval`: a yes or no (with a reason) decides the call in `call`. @default 'question' */
  readonly kind?: 'question' | 'approval';
  /** What the caller is shown, whole: the question, or for an approval the call to approve in words. */
  readonly question: string;
  /** The call waiting for approval (`kind: 'approval'`): its namespaced tool and its arguments, redacted. */
  readonly call?: { readonly toolName: string; readonly input: unknown };
  /** The ask's (or the call to approve's) tool call: the reply becomes its result. `write-back` for the write-back's approval. */
  readonly toolCallId: string;
  /** ISO 8601; `tasks.inputTimeoutMs` counts from it. */
  readonly askedAt: string;
  /** The first answer given to a question; a task `pending` with one resumes its run from its checkpoint, the answer as the ask's result. */
  readonly answer?: string;
  /** The first decision on an approval: `true` runs the call, `false` tells the model it was denied (with `reason`). */
  readonly approved?: boolean;
  /** The caller's reason given with a decision. */
  readonly reason?: string;
  readonly answeredAt?: string;
  /**
   * The id the first reply came with, when its door has one (an A2A message's `messageId`): the same reply under
   * the same id again (a client's retry) is known as that one, not refused as a second.
   */
  readonly replyId?: string;
}

/** A caller's reply to a task in `input_required`: an answer to a question, or a decision on an approval. */
export type TaskReply = { readonly answer: string } | { readonly approve: boolean; readonly reason?: string };

/** How many earlier questions (with their replies) a task's record keeps: a conversation's history, bounded. */
export const KEPT_INPUTS = 50;

/** Whether a task's input has been replied to (answered or decided). */
export const isReplied = (input: TaskInput | undefined): boolean => input?.answer !== undefined || input?.approved !== undefined;

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
  /** Everything the model wrote, step by step, separated by blank lines. */
  readonly text: string;
  /** The final answer: the text of the last step that wrote any. */
  readonly finalText: string;
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
  /** Run time so far, in milliseconds, across restarts (time the process was down not counted). */
  readonly elapsedMs?: number;
  /** When the task was resumed after a restart: the step it continued after, each time. */
  readonly resumes?: readonly number[];
  /** The W3C trace context the start request carried (`params._meta`): the task's spans are its children, after a restart too. */
  readonly trace?: TraceCarrier;
  /** The last question its run asked the caller, and its answer once given (see `input_required`). */
  readonly input?: TaskInput;
  /** The questions asked before `input`, each with its reply, oldest first (the last {@link KEPT_INPUTS}). */
  readonly earlierInputs?: readonly TaskInput[];
  /** Receivers the caller gave for this task's transitions (A2A push notification configs). They hold its credentials: no view shows them. */
  readonly push?: readonly PushTarget[];
}

/** A change to a task's fields other than its identity. */
export type TaskPatch = Partial<Omit<TaskRecord, 'id' | 'principal' | 'request' | 'createdAt' | 'trace'>>;

/** What a store's `list` filters by. */
export interface TaskFilter {
  readonly principal?: string;
  readonly status?: TaskStatus;
}

/** Which page of a list. */
export interface TaskPageRequest {
  /** A `nextCursor` from the page before; absent for the newest tasks. */
  readonly cursor?: string;
  /** @default 50 */
  readonly limit?: number;
}

/** A page of tasks, newest first. */
export interface TaskListPage {
  readonly tasks: readonly TaskRecord[];
  /** Pass as `cursor` for the next (older) page; absent on the last page. Opaque. */
  readonly nextCursor?: string;
  /** How many tasks match the filter in all. */
  readonly total: number;
}

/** What a principal's runs spent in one day: tokens (input plus output, map calls included) and USD (of priced models only). */
export interface DaySpend {
  readonly tokens: number;
  readonly usd: number;
}

/**
 * Where tasks are kept: records, bounded logs, run checkpoints, and the outbox of webhook messages. In
 * memory (`createMemoryTaskStore`, the library's default) or in SQLite (`createSqliteTaskStore`, durable);
 * a shared store implements the same interface. Status changes go through `transition`, which must be
 * atomic: of many concurrent transitions out of one status, exactly one applies; so must an outbox claim:
 * of many concurrent claims, one gets a message. Whoever creates a store closes it.
 */
export interface TaskStore extends WebhookOutbox, AsyncDisposable {
  /**
   * Stores a new task and resolves it. When the task has an `idempotencyKey` that the same principal
   * already used, nothing is stored and the existing task is resolved instead (atomically: of two
   * concurrent inserts with one key, one stores).
   */
  insert(task: TaskRecord): Promise<TaskRecord>;
  get(id: string): Promise<TaskRecord | undefined>;
  /** The task `principal` started with `idempotencyKey`, if it is still kept. */
  findByIdempotencyKey(principal: string, idempotencyKey: string): Promise<TaskRecord | undefined>;
  /** Applies `patch` only if the task's status is one of `from`; resolves the updated task, or `undefined` when it did not apply. */
  transition(id: string, from: readonly TaskStatus[], patch: TaskPatch): Promise<TaskRecord | undefined>;
  /** Applies `patch` to a task whatever its status, but never changes `status`. */
  update(id: string, patch: Omit<TaskPatch, 'status'>): Promise<TaskRecord | undefined>;
  /**
   * Adds `target` to task `id`'s push targets, last, in place of the one with its id, reading and writing them in
   * one atomic step: of concurrent adds and removals on one task none is lost, and the cap holds. Resolves the
   * task as changed, `undefined` when it is not kept.
   * @throws {KlymError} `INVALID_ARGUMENT` when the task already has `max` targets besides one of `target.id`
   */
  addPushTarget(id: string, target: PushTarget, max: number): Promise<TaskRecord | undefined>;
  /**
   * Removes task `id`'s push target `targetId`, in one atomic step as `addPushTarget`; removing one that is not
   * there changes nothing. Resolves the task as it then is, `undefined` when it is not kept.
   */
  removePushTarget(id: string, targetId: string): Promise<TaskRecord | undefined>;
  /** A page of the tasks that match `filter`, newest first (by creation; ties by insertion order). */
  list(filter?: TaskFilter, page?: TaskPageRequest): Promise<TaskListPage>;
  /** How many tasks are in each status (all principals). */
  counts(): Promise<Readonly<Record<TaskStatus, number>>>;
  /**
   * What a restarted manager takes up again, oldest first: tasks `pending` or `running`, and finished tasks
   * whose `writeBack.status` is still `pending` (the process died while writing their result).
   */
  unfinished(): Promise<readonly TaskRecord[]>;
  /** Deletes terminal tasks that finished before `before`, with their logs and checkpoints; resolves them. */
  evict(before: Date): Promise<readonly TaskRecord[]>;
  /** Appends to the task's log. Fire and forget: a store that writes to disk batches (a read sees every append made before it). */
  appendLog<Type extends TaskLogType>(id: string, type: Type, data: TaskLogData<Type>): void;
  /** Entries with `seq > after`, at most `limit`, oldest first. */
  readLog(id: string, after?: number, limit?: number): Promise<TaskLogPage>;
  /** The newest `count` entries, oldest first. */
  tailLog(id: string, count: number): Promise<TaskLogPage>;
  /**
   * Records the task's run checkpoint, replacing the one before. Durable once it returns, or once the
   * Promise it returns resolves (a store over the network): a durable store writes it with the log entries
   * buffered so far. The agent saves one before each tool call's request goes out and sends the request
   * only after that, so an unrecorded call is never replayed; a throw or a rejection keeps the call unsent.
   */
  saveCheckpoint(id: string, checkpoint: AgentCheckpoint): void | Promise<void>;
  loadCheckpoint(id: string): Promise<AgentCheckpoint | undefined>;
  /**
   * Keeps an artifact of task `id` (a tool result kept whole, and its `original` JSON when given) until the
   * task is evicted; durable once it resolves. A task no longer kept keeps nothing. Checked against the
   * store's caps (`artifacts` of its options) in the same atomic step as the write, so that of two concurrent
   * saves of which one fits, one is kept: an artifact counts its `bytes`, and its `records.originalBytes` when
   * its original is kept. Past the store's `maxBytes`, the artifacts of the tasks that finished first are
   * dropped first, a whole task's at a time (the tasks stay; their artifacts are then not found).
   * @throws {KlymError} `ARTIFACT_LIMIT`, naming the size, the cap and what is kept, when the task's cap would be
   * passed, or the store's even once every other finished task's artifacts were dropped (nothing is dropped then)
   */
  saveArtifact(id: string, artifact: StoredArtifact): Promise<void>;
  /** Task `id`'s artifact `artifactId` with its text (and original); `undefined` when the task has none of that id. */
  loadArtifact(id: string, artifactId: string): Promise<StoredArtifact | undefined>;
  /**
   * Bytes `start` to `end` (`end` excluded; both clamped to the text) of the UTF-8 text of task `id`'s artifact
   * `artifactId`, reading no more of it into this process than that (SQLite `substr`, Redis a script's
   * `string.sub`, memory a slice); `undefined` when the task has none of that id. A range may cut a character:
   * a reader asks for ranges that start on one, and decodes no further than whole characters.
   */
  loadArtifactRange(id: string, artifactId: string, start: number, end: number): Promise<Uint8Array | undefined>;
  /** Task `id`'s artifacts, oldest first, without their text or original (neither is read). */
  listArtifacts(id: string): Promise<readonly ArtifactInfo[]>;
  /** Bytes the artifacts of every task kept count against the store's `maxBytes`. */
  artifactBytes(): Promise<number>;
  /**
   * Adds `spend` to what `principal` spent on `day` (`YYYY-MM-DD`, the UTC date) and resolves the day's total,
   * atomically (of two concurrent adds, neither is lost) and durably once it resolves. A store may forget days
   * older than a month.
   */
  addSpend(principal: string, day: string, spend: DaySpend): Promise<DaySpend>;
  /** What `principal` spent on `day`: zero when nothing. */
  spendOf(principal: string, day: string): Promise<DaySpend>;
  /** Writes what is buffered and releases the store (for SQLite, its file lock). Idempotent. */
  close(): Promise<void>;
}

/** What a request is narrowed to: the server's models, budgets and tool rules (the same rules the runs apply). */
export interface RequestLimits extends AccessRules {
  /** The models a caller may name; the first is the default. Never empty. */
  readonly models: readonly string[];
  readonly defaultBudget: AgentBudget;
  readonly maxBudget: AgentBudget;
  readonly systemPrompt?: string;
  /** The webhook endpoints a start may name in `webhook`. @default none */
  readonly webhooks?: readonly string[];
}

/** A task's lifecycle, as `TaskManagerOptions.onEvent` receives it (noun-verb). */
export type TaskEvent =
  | {
      /** `task-input-required`: its run asked the caller a question (`task.input`) and the task waits for the answer. */
      readonly type: 'task-create' | 'task-evict' | 'task-input-required';
      readonly task: TaskRecord;
    }
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

/** Who is asking: tasks are visible only to the principal who started them. */
export interface Caller {
  readonly principal: string;
}
