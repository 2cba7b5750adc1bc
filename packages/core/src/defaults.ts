/**
 * Every default of Klym, defined once: its tasks', its upstreams', its Redis connections', its webhooks'.
 * The pool, the task manager, the task service, the stores and the server's configuration schema all take
 * their defaults from here, so no layer can drift from another.
 * @module
 */

/** Node's timers fire at once past 2^31 - 1 ms (about 24.8 days): no time limit may be longer. */
export const MAX_TIMER_MS = 2_147_483_647;

/** Steps of a run when nobody sets `maxSteps`. */
export const DEFAULT_MAX_STEPS = 25;

/** Retries of a model call that failed in a way worth retrying (rate limits, 5xx), when nobody sets `maxRetries`. */
export const DEFAULT_MAX_RETRIES = 2;

/**
 * Defaults of a run's context accounting (`agent/context-window.ts`): the window of a model Klym does not
 * know, and the room a request keeps for the model's answer.
 */
export const CONTEXT_DEFAULTS = {
  /**
   * The context window, in tokens, of a model neither built in (`DEFAULT_CONTEXT_WINDOWS`) nor configured
   * (`contextWindows`): small on purpose, the usual context of a model served locally (Llama 3.1, Qwen 2.5
   * and Mistral served at 32k). A larger model is told with `llm.contextWindows`.
   */
  unknownModelWindow: 32_768,
  /** The share of the window a request leaves free for the model's answer… */
  answerReserveShare: 0.1,
  /** …but never more tokens than this (GPT-4o's largest answer): a 1M window keeps 16k, not 100k. */
  answerReserveMaxTokens: 16_384,
} as const;

/** Defaults of tasks: the task manager's and the task service's. */
export const TASK_DEFAULTS = {
  /** Tasks running at once; more wait as `pending`. */
  concurrency: 4,
  /** Tasks waiting as `pending` at most; one more is refused with `TASK_QUEUE_FULL`. */
  maxQueued: 1_000,
  /**
   * What a refusal that a wait helps (`TASK_QUEUE_FULL`, `QUOTA_EXCEEDED` of `maxQueued`) asks the caller to wait,
   * in milliseconds, until a run has ended here to tell: after that, the median run time of the last `runTimesKept`.
   */
  retryAfterMs: 30_000,
  /** Runs whose time the manager keeps, for the median a refusal's `retryAfterMs` gives. */
  runTimesKept: 50,
  /** Wall-clock limit of one task's run, in milliseconds (30 min); `TASK_TIMEOUT` past it. */
  timeoutMs: 1_800_000,
  /** How long a finished task is kept before it is evicted, in milliseconds (1 h). */
  ttlMs: 3_600_000,
  /** Bytes of log entries kept per task (256 KiB); older entries are dropped and counted. */
  logMaxBytes: 262_144,
  /** Bytes one log entry may take (4 KiB); longer strings inside it are cut. */
  logMaxEntryBytes: 4_096,
  /** On close, how long running tasks may finish before they are cancelled, in milliseconds. */
  shutdownGraceMs: 10_000,
  /** Whether a task that was running when the process died resumes from its last step on restart. */
  resumeOnRestart: true,
  /**
   * How many times a task resumes (after restarts, or its runner thread dying under it) before a runner thread's
   * death ends it as `error`: a step that always kills its thread (memory, say) does not loop.
   */
  maxRunnerResumes: 3,
  /** Whether a task's model is offered `klym__ask_caller` (unless its request says `ask_caller: false`). */
  askCaller: true,
  /** How long a task waits for its caller's answer, in milliseconds (a day); then it ends as `error`, `INPUT_TIMEOUT`. */
  inputTimeoutMs: 86_400_000,
  /** How often waiting tasks are checked against `inputTimeoutMs`, at most, in milliseconds. */
  inputCheckMs: 60_000,
  /** The budget of a task whose request asks for none. */
  defaultBudget: { maxSteps: DEFAULT_MAX_STEPS },
  /** The most a caller may ask for; larger asks are capped. */
  maxBudget: { maxSteps: 100, timeoutMs: 1_800_000 },
  /** The models a caller may choose when none are configured (the first is the default). */
  models: ['scripted'],
  /** Characters of a task's final answer the default status shows. */
  resultPreviewChars: 400,
  /** Tasks one page of a task list holds when the caller does not say. */
  listPageSize: 50,
  /** Log entries `check_task_status` shows at a glance (no `log_after`, no `max_log_entries`). */
  glanceLogEntries: 3,
  /** Log entries `check_task_status` gives after `log_after` when `max_log_entries` is not set. */
  statusLogPageSize: 20,
  /** Log entries a page of a task's log holds when the caller does not say (REST `GET /api/tasks/:id/logs`). */
  logPageSize: 100,
  /** Time limit of the write-back's `add_node` call, in milliseconds. */
  writeBackTimeoutMs: 30_000,
  /** Log entries the SQLite store buffers at most before it writes them without waiting for the next tick. */
  sqliteBatchEntries: 256,
  /** Steps below the process's scheduling priority the runner thread runs at. */
  runnerNiceness: 10,
  /** On the runner thread's close, how long runs' calls may take to end before its pool aborts them, in milliseconds. */
  runnerDrainTimeoutMs: 5_000,
  /** The most log entries one page of a task's log may hold, whatever the caller asks. */
  maxLogPageSize: 500,
  /** Log entries `TaskManager.logs` reads when the caller gives no `limit`. */
  managerLogPageSize: 50,
  /** Characters of an artifact's original text one `read_task_artifact { original: true }` page gives (REST gives it whole). */
  originalPageChars: 32_768,
  /** Characters of CSV a `query_task_artifact` answer holds at most; it says how many rows it left out. */
  queryAnswerChars: 32_768,
  /** Tasks whose artifacts the manager keeps read and indexed for the next page (`read_task_artifact`), at most. */
  artifactReaders: 4,
} as const;

/** Defaults of `klym__run_code`, the programs a model writes (the config's `code` section). */
export const CODE_DEFAULTS = {
  /** A program's heap, in MiB: past it, the program fails naming `code.memoryMiB`. */
  memoryMiB: 64,
  /** Wall-clock limit of one program, its host calls included, in milliseconds (1 min). */
  timeoutMs: 60_000,
  /** Rows one `sql()` of a program answers at most; a bigger answer fails that call, saying how many rows it had. */
  maxRows: 10_000,
} as const;

/** Defaults of artifacts: tool results kept whole out of the conversation, and the built-in tools over them. */
export const ARTIFACT_DEFAULTS = {
  /** A result over this share of the model's context window becomes an artifact. */
  thresholdShare: 0.1,
  /**
   * The window in tokens that stands in for the scripted model's, which has none: the artifact threshold,
   * the map's chunks and the compaction's budget are shares of it there. Every other model uses its own
   * window (configured, built in, or `CONTEXT_DEFAULTS.unknownModelWindow`).
   */
  contextWindow: 128_000,
  /** Bytes of artifacts one task may keep at most (1 GiB); one more is refused with `ARTIFACT_LIMIT`. */
  maxBytesPerTask: 1_073_741_824,
  /**
   * Bytes of artifacts a task store keeps in all (8 GiB) where it keeps them on disk (SQLite); past it, a save
   * drops the artifacts of the tasks that finished first. Stores that hold them in memory default lower: Redis
   * to 2 GiB, the memory store to a quarter of the heap's limit.
   */
  maxBytes: 8_589_934_592,
  /** Lines of an artifact's start and of its end that the model is shown in the artifact's place. */
  previewLines: 10,
  /** Characters of one line shown in a preview or as a match's context; the rest is counted, and where to read it said. */
  maxLineChars: 300,
  /** Lines `klym__read_artifact` gives when `limit` is not set, and the most it gives. */
  readLines: 100,
  maxReadLines: 500,
  /**
   * Tokens of one page of `klym__read_artifact` at most, where a run does not set it: a run's pages stay
   * under three quarters of its artifact threshold, so that a read's answer is never an artifact itself.
   */
  pageTokens: 8_000,
  /** Characters shown on each side of a match in a line longer than `maxLineChars`. */
  grepWindowChars: 150,
  /** Matches `klym__grep_artifact` gives when `max_matches` is not set, and the most it gives. */
  grepMatches: 50,
  maxGrepMatches: 500,
  /** Lines of context around a match, at most. */
  maxGrepContext: 10,
  /** `klym__map_artifact`'s model calls under way at once. */
  mapConcurrency: 4,
  /**
   * Tokens one `klym__map_artifact` call may send at most (system prompt, instruction and lines), whatever the
   * model's window (and at most half of it): a chunk is a call a model answers well, and one failed call loses little.
   */
  mapChunkTokens: 32_000,
  /**
   * Tokens one `klym__map_artifact` answer may have (the call's `maxOutputTokens`, and at most half the model's
   * window): a chunk's answer is short, and a call's most is what the run's budget holds for it before it is sent.
   */
  mapAnswerTokens: 4_096,
  /** Before a step, a conversation past this share of the window is compacted. */
  compactShare: 0.6,
  /** The latest steps a compaction keeps whole. */
  compactKeepSteps: 2,
} as const;

/** Defaults of an upstream's pool, circuit breaker and time limits (`UpstreamConfig`), defined once. */
export const UPSTREAM_DEFAULTS = {
  /** Sessions opened at start-up and kept open. */
  min: 1,
  /** Most sessions at once (so most concurrent calls) over HTTP; a stdio upstream gets 1 (`maxStdio`). */
  max: 4,
  /** Most sessions at once of a stdio upstream: several server processes writing one store lose data. */
  maxStdio: 1,
  /** Most callers waiting for a session; one more is refused at once with `UPSTREAM_UNAVAILABLE`. */
  maxWaiting: 1_000,
  /** Connect plus `initialize`, in milliseconds. */
  connectMs: 10_000,
  /** One request, when the caller gives no `timeoutMs`; progress notifications restart it. */
  requestMs: 60_000,
  /** Hard limit of one request, however much progress it reports (10 min). */
  maxTotalMs: 600_000,
  /** Waiting for a free session when all `max` are busy. */
  acquireMs: 30_000,
  /** A session idle this long is pinged before it is lent, and replaced if the ping fails. */
  idlePingMs: 30_000,
  /** Consecutive connect failures that open the circuit breaker. */
  failureThreshold: 3,
  /** Wait before the breaker's first half-open probe; doubles after each failed probe. */
  cooldownMs: 1_000,
  /** Longest wait between the breaker's probes. */
  maxCooldownMs: 10_000,
  /**
   * The largest message an upstream may send (128 MiB): a stdio frame, a JSON body, an SSE event. A larger
   * one fails the call it answers with `UPSTREAM_MESSAGE_TOO_LARGE`, and the session goes on. Enough for a
   * 50 MB log read through server-filesystem, which sends a file twice (text and `structuredContent`): 96 MiB.
   */
  maxMessageBytes: 134_217_728,
} as const;

/** Defaults of Klym's connections to Redis (the task store's and the task queue's), defined once. */
export const REDIS_DEFAULTS = {
  /** How long the first connection to Redis may take before the store or queue refuses to open. */
  connectTimeoutMs: 10_000,
  /** How long one call to Redis may take before it counts as failed. */
  commandTimeoutMs: 5_000,
} as const;

/** Defaults of `createBullmqTaskQueue` (`@klym/core/redis`), defined once. */
export const TASK_QUEUE_DEFAULTS = {
  /** Prefix of BullMQ's keys; with the queue's name they read `klym:bull:tasks:…`, beside the task store's `klym:…`. */
  prefix: 'klym:bull',
  /** The queue's name: processes that name the same one serve the same tasks. */
  name: 'tasks',
  /** How long a worker's lock on a task it runs lasts unless renewed (it is renewed every half of it). */
  lockDurationMs: 30_000,
  /**
   * How often workers look for tasks whose worker stopped renewing its lock. A stalled job is found in two
   * checks (one marks it, the next moves it back once its lock is gone), so a dead worker's task is taken
   * over within about `lockDurationMs` + 2 × this: 50 s.
   */
  stalledIntervalMs: 10_000,
  /** How many times a task may be taken over from a worker that stopped; once more ends it as `TASK_INTERRUPTED`. */
  maxStalledCount: 1,
  /** How long the first connection to Redis may take. */
  connectTimeoutMs: REDIS_DEFAULTS.connectTimeoutMs,
  /** How long one call to Redis may take before it counts as failed. */
  commandTimeoutMs: REDIS_DEFAULTS.commandTimeoutMs,
} as const;

/** Defaults of Klym's tasks as MCP tasks and of progress notifications (`@klym/core/mcp`), defined once. */
export const MCP_TASK_DEFAULTS = {
  /** How long a client should wait between two `tasks/get` of a task, in milliseconds (the `pollInterval` it is told). */
  pollIntervalMs: 1_000,
  /** The least time between two `notifications/progress` of one task, in milliseconds: more steps in between are told as one. */
  progressIntervalMs: 1_000,
  /** Tasks one page of `tasks/list` holds. */
  listPageSize: TASK_DEFAULTS.listPageSize,
} as const;

/** Defaults of webhook endpoints (`createTaskService`'s `webhooks`), defined once. */
export const WEBHOOK_DEFAULTS = {
  /** The events an endpoint receives when it names none: a task waiting on its caller, and every end. */
  events: ['task.input_required', 'task.completed', 'task.failed', 'task.cancelled'],
  /** How long a message is retried after its event, in milliseconds (24 h); then it is given up. */
  retryForMs: 86_400_000,
  /** The delay before the first retry, in milliseconds; it doubles with each attempt (with jitter). */
  retryDelayMs: 5_000,
  /** The longest delay between two attempts, in milliseconds (1 h). */
  maxRetryDelayMs: 3_600_000,
  /** How long a receiver may take to answer one attempt, in milliseconds. */
  timeoutMs: 10_000,
  /** How often the dispatcher looks in the outbox for messages due, in milliseconds. */
  pollMs: 1_000,
  /** Deliveries under way at once, across endpoints. */
  maxInFlight: 16,
  /** On close, how long deliveries under way may finish before they are cut short, in milliseconds. */
  closeGraceMs: 2_000,
} as const;
