import type { ArtifactReaderOptions } from '../artifacts/artifact-reader.ts';
import type { AgentRunner } from '../agent/types.ts';

export type { AgentRunner } from '../agent/types.ts';
import type { SessionPool } from '../pool/session-pool.ts';
import type { TraceCarrier } from '../telemetry/trace-context.ts';
import type { TracingOptions } from '../telemetry/tracing.ts';
import type { TaskQueue } from './queue/task-queue.ts';
import type { PerPrincipalOptions, PrincipalUsage } from './admission/principal-quotas.ts';
import type { BoundedLogOptions, TaskLogPage } from './store/task-log.ts';
import type { TaskRunDefaults } from './runner/task-run.ts';
import type { Caller, TaskEvent, TaskListPage, TaskPageRequest, TaskRecord, TaskReply, TaskRequest, TaskStatus, TaskStore } from './store/task-types.ts';

export type { Caller, TaskEvent } from './store/task-types.ts';
import type { WriteBackOptions } from './runner/write-back.ts';
import type { PushTarget } from '../webhooks/push-types.ts';
import type { ArtifactSlice, ReadRequest } from '../artifacts/artifact-store.ts';
import type { ArtifactInfo, QueryPage } from '../artifacts/artifact-types.ts';
import type { TaskQueriesOptions } from './runner/task-queries.ts';
import type { QueryAnswer } from '../artifacts/artifact-query.ts';

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
  /**
   * Offer each task's model `klym__ask_caller { question }` (a task's request may turn it off with `askCaller: false`).
   * A run that asks parks: its task waits as `input_required`, holding no runner slot and no upstream session,
   * until `reply` answers it and a run goes on from its checkpoint, the answer as the ask's result. @default true
   */
  readonly askCaller?: boolean;
  /**
   * How long a task waits for its caller's answer, in milliseconds; then it ends as `error` with `INPUT_TIMEOUT`.
   * Checked when the manager opens (so across restarts) and every minute at most, by `now`. @default 86_400_000 (a day)
   */
  readonly inputTimeoutMs?: number;
  /** Run options for every task. @default {} (runAgent's own defaults) */
  readonly defaults?: TaskRunDefaults;
  /** Writing results into the graph. @default { upstream: 'grynya', byDefault: false } */
  readonly writeBack?: WriteBackOptions;
  /** Strings never to show in logs, errors or results (API keys, tokens). Provider keys in `defaults` and the pool's `secrets` are added. @default [] */
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
  /**
   * How `read_task_artifact` cuts pages: the token counter and the tokens of a page.
   * @default { countTokens: estimateTokens, pageTokens: ARTIFACT_DEFAULTS.pageTokens (8,000) }
   */
  readonly artifactReading?: ArtifactReaderOptions;
  /**
   * The clock that says which day (UTC) a principal's spend counts in (`perPrincipal.maxTokensPerDay`), when a
   * question was asked and whether it waited past `inputTimeoutMs`, in ms since the epoch. @default Date.now
   */
  readonly now?: () => number;
}

/** A start refused over a limit: a principal's quota (`QUOTA_EXCEEDED`, `quota` naming it) or the queue's bound (`TASK_QUEUE_FULL`). */
export interface TaskRefusal {
  readonly principal: string;
  readonly code: 'QUOTA_EXCEEDED' | 'TASK_QUEUE_FULL';
  readonly quota?: string;
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
  queryArtifacts(id: string, caller: Caller, sql: string, options?: QueryPage & { readonly signal?: AbortSignal }): Promise<QueryAnswer>;
  /**
   * Replies to what a task's run waits for (`input_required`): `{ answer }` to a question, `{ approve, reason? }` to an
   * approval. The reply is kept on the task (the first one wins, atomically), the task goes back to `pending` and is
   * queued, and the run that takes it up goes on from its checkpoint — the answer as the ask's result, the approved
   * call run, or the denial as the call's result — in any process, after a restart too.
   * @throws {KlymError} `TASK_NOT_FOUND` (another principal's task too); `TASK_NOT_WAITING` for a task not waiting
   * for input (naming its status) or already answered; `INVALID_ARGUMENT` for a reply of the wrong kind; `STORE_UNAVAILABLE`.
   * `options.replyId`, the id the reply came with where its door has one (an A2A message's), is kept as `input.replyId`.
   */
  reply(id: string, caller: Caller, reply: TaskReply, options?: { readonly replyId?: string }): Promise<TaskRecord>;
  /** Cancels a pending, running or waiting task; a finished one is left as it is, and the outcome says so. @throws {KlymError} `TASK_NOT_FOUND` */
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
