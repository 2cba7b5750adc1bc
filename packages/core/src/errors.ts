/**
 * What went wrong, as a stable code a caller can branch on.
 *
 * - `CONFIG_INVALID`: options passed in code or config are not usable.
 * - `UPSTREAM_UNAVAILABLE`: no session to the upstream could be opened (connect, handshake, or the pool is exhausted).
 * - `UPSTREAM_TIMEOUT`: the upstream did not answer a request in time.
 * - `UPSTREAM_ERROR`: the upstream answered a request with a protocol error, or the session broke mid-call.
 * - `UPSTREAM_MESSAGE_TOO_LARGE`: the upstream answered a call with a message over its `maxMessageBytes`; that call
 *   failed, the session goes on (the message names the size, the limit and the key that raises it).
 * - `UPSTREAM_NOT_FOUND`: no upstream of that name is configured.
 * - `TOOL_NOT_FOUND`: no tool of that name is known.
 * - `TOOL_NAME_COLLISION`: two upstream tools map to the same namespaced name.
 * - `ABORTED`: the caller's `AbortSignal` fired.
 * - `POOL_CLOSED`: the pool is closing or closed.
 * - `MODEL_ERROR`: the language model's provider failed (after its own retries), or no model matches a name.
 * - `TOOL_DENIED`: a policy forbids the tool.
 * - `BUDGET_EXCEEDED`: a run's budget (steps, tokens, cost, time) ran out.
 * - `CONTEXT_OVERFLOW`: a model request would not fit the model's context window (less the room kept for its
 *   answer), so it was not sent; the message names the model, the window and the count.
 * - `TASK_NOT_FOUND`: no task of that id is visible to the caller.
 * - `TASK_TIMEOUT`: a task ran past its wall-clock limit.
 * - `TASK_QUEUE_FULL`: too many tasks are waiting to start; try again later.
 * - `QUOTA_EXCEEDED`: a start would pass one of the caller's own quotas (`tasks.perPrincipal`); the message names
 *   the quota, its limit and what is in use (`quota`, `limit`, `used`), and `retryAfterMs` when a wait helps. Other
 *   callers' starts are not affected.
 * - `TASK_INTERRUPTED`: the process running the task died, and it was not resumed (`resumeOnRestart: false`).
 * - `TASK_NOT_WAITING`: a reply to a task that is not waiting for input (the message names its status), or whose
 *   question was already answered (the first answer stands).
 * - `INPUT_TIMEOUT`: a task waited for its caller's answer longer than `tasks.inputTimeoutMs`.
 * - `STORE_UNAVAILABLE`: the task store cannot be opened or used (the message names the file or server and why).
 * - `INVALID_ARGUMENT`: a request's arguments are not usable (the message names the field).
 * - `SHUTTING_DOWN`: Klym is shutting down and takes no new work.
 * - `ARTIFACT_NOT_FOUND`: the task has no artifact of that id (another task's artifact is not found either).
 * - `ARTIFACT_LIMIT`: keeping one more artifact would pass the task's cap on artifact bytes.
 * - `INTERNAL`: a bug in Klym; the message says what was being done.
 * - `QUERY_FAILED`: a SQL query over a task's artifacts failed: DuckDB refused it or an operation in it (its message
 *   is quoted), or it passed a limit (time, memory, rows; the message names the limit and the option that sets it).
 * - `CODE_FAILED`: a `klym__run_code` program failed: it did not parse, threw, or passed a limit (the message names
 *   `code.timeoutMs` or `code.memoryMiB` and its value). The run goes on; the model reads why.
 */
export type KlymErrorCode =
  | 'CONFIG_INVALID'
  | 'UPSTREAM_UNAVAILABLE'
  | 'UPSTREAM_TIMEOUT'
  | 'UPSTREAM_ERROR'
  | 'UPSTREAM_MESSAGE_TOO_LARGE'
  | 'UPSTREAM_NOT_FOUND'
  | 'TOOL_NOT_FOUND'
  | 'TOOL_NAME_COLLISION'
  | 'ABORTED'
  | 'POOL_CLOSED'
  | 'MODEL_ERROR'
  | 'TOOL_DENIED'
  | 'BUDGET_EXCEEDED'
  | 'CONTEXT_OVERFLOW'
  | 'TASK_NOT_FOUND'
  | 'TASK_TIMEOUT'
  | 'TASK_QUEUE_FULL'
  | 'QUOTA_EXCEEDED'
  | 'TASK_INTERRUPTED'
  | 'TASK_NOT_WAITING'
  | 'INPUT_TIMEOUT'
  | 'STORE_UNAVAILABLE'
  | 'INVALID_ARGUMENT'
  | 'SHUTTING_DOWN'
  | 'ARTIFACT_NOT_FOUND'
  | 'ARTIFACT_LIMIT'
  | 'INTERNAL'
  | 'QUERY_FAILED'
  | 'CODE_FAILED';

/** Options of {@link KlymError}: the structured fields that name the failing thing. */
export interface KlymErrorOptions {
  /** The upstream (by its configured name) the failure belongs to. */
  readonly upstream?: string;
  /** The tool (original upstream name) the failure belongs to. */
  readonly toolName?: string;
  /** The quota a refusal is about (`maxQueued`), by its option's name. */
  readonly quota?: string;
  /** The limit that was reached: the quota's, or `tasks.maxQueued`. */
  readonly limit?: number;
  /** What is in use against `limit` (tasks waiting, …). */
  readonly used?: number;
  /** How long a caller should wait before trying again, in milliseconds, when a wait helps (`Retry-After` on HTTP). */
  readonly retryAfterMs?: number;
  /** The underlying error. */
  readonly cause?: unknown;
}

/**
 * The one error class of `@klym/core`. Its message names the failing thing; `code` says what kind of
 * failure it is; `upstream` and `toolName` say where; a refusal over a limit says which (`quota`, `limit`,
 * `used`) and when to try again (`retryAfterMs`); `cause` keeps the original error.
 *
 * @example
 * ```ts
 * try { await pool.callTool('grynya', 'query_graph', { query: 'RETURN 1' }) }
 * catch (error) { if (error instanceof KlymError && error.code === 'UPSTREAM_UNAVAILABLE') retryLater() }
 * ```
 */
export class KlymError extends Error {
  override readonly name = 'KlymError';
  readonly code: KlymErrorCode;
  readonly upstream: string | undefined;
  readonly toolName: string | undefined;
  readonly quota: string | undefined;
  readonly limit: number | undefined;
  readonly used: number | undefined;
  readonly retryAfterMs: number | undefined;

  constructor(code: KlymErrorCode, message: string, options: KlymErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.upstream = options.upstream;
    this.toolName = options.toolName;
    this.quota = options.quota;
    this.limit = options.limit;
    this.used = options.used;
    this.retryAfterMs = options.retryAfterMs;
  }
}

/** Whether `error` is a {@link KlymError}, optionally of one of the given codes. */
export function isKlymError(error: unknown, ...codes: readonly KlymErrorCode[]): error is KlymError {
  return error instanceof KlymError && (codes.length === 0 || codes.includes(error.code));
}
