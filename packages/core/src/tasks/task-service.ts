import { RUN_SETTING_KEYS, type ServiceRunSettings } from '../agent/run-settings.ts';
import type { AgentBudget } from '../agent/types.ts';
import { TASK_DEFAULTS } from '../defaults.ts';
import { KlymError } from '../errors.ts';
import type { PoolTool, SessionPool } from '../pool/session-pool.ts';
import { createRedactor, secretsOf } from '../redact.ts';
import { assertAccessRules, type ToolSelection } from '../tools/tool-policy.ts';
import { createWebhookDispatcher, type WebhookDispatcher } from '../webhooks/webhook-dispatcher.ts';
import type { WebhookEndpoint } from '../webhooks/webhook-types.ts';
import { resolvePushOptions } from '../webhooks/push-delivery.ts';
import type { PushOptions } from '../webhooks/push-types.ts';
import { createTaskPush, type TaskPush } from '../webhooks/task-push.ts';
import { createMemoryTaskStore } from './store/memory-task-store.ts';
import { describeCapabilities, viewHealth, type CapabilitiesView, type HealthView } from './views/capabilities.ts';
import { viewQuota, type QuotaView } from './admission/principal-quotas.ts';
import { createTaskManagerWith } from './task-manager.ts';
import { PASSED_WIRING, resolveTaskSettings } from './task-settings.ts';
import type { StartOptions, TaskEvent, TaskManager, TaskManagerOptions } from './task-manager-types.ts';
import type { RequestLimits, TaskReply } from './store/task-types.ts';
import {
  narrowTaskRequest,
  type CancelTaskArgs,
  type ReplyTaskArgs,
  type CheckTaskArgs,
  type ListTasksArgs,
  type QueryArtifactsArgs,
  type ReadArtifactArgs,
  type StartTaskArgs,
  type TaskLogsArgs,
} from './task-request.ts';
import {
  MAX_GLANCE_CHARS,
  viewBudgetLimits,
  viewTaskList,
  viewTaskStatus,
  type TaskCancelView,
  type TaskReplyView,
  type TaskListView,
  type TaskStartView,
  type TaskStatusView,
} from './views/task-views.ts';
import { viewLogPage, type TaskLogPageView } from './views/log-views.ts';
import { toCsv } from '../artifacts/artifact-query.ts';
import { viewArtifact, viewSlice, type TaskArtifactSliceView, type TaskQueryView } from './views/artifact-views.ts';

/**
 * Options of {@link createTaskService}: the task manager's (its settings resolved once, here, and its wiring
 * passed on: `PASSED_WIRING` in `task-settings.ts`, which the compiler asks to list a new one); the run settings every task gets as `runAgent` takes them, those of
 * `RUN_SETTINGS` (the providers, their prices and context windows, retries, temperature, the map's and the
 * artifacts' settings, and the access rules `upstreamTools`, `policies` and `readOnlyTools`, which also decide
 * what a request may narrow to); and the limits a caller's request is narrowed to.
 */
export interface TaskServiceOptions extends Omit<TaskManagerOptions, 'defaults' | 'secrets' | 'onEvent'>, ServiceRunSettings {
  /** The models a caller may name in `model`; the first is the default. @default TASK_DEFAULTS.models (['scripted']) */
  readonly models?: readonly string[];
  /** Default system prompt of tasks (may hold `{{tools}}`). @default runAgent's built-in prompt */
  readonly systemPrompt?: string;
  /** Budget of a task that asks for none. @default TASK_DEFAULTS.defaultBudget ({ maxSteps: 25 }) */
  readonly defaultBudget?: AgentBudget;
  /** The most a caller may ask for; larger asks are capped. @default TASK_DEFAULTS.maxBudget ({ maxSteps: 100, timeoutMs: 1_800_000 }) */
  readonly maxBudget?: AgentBudget;
  /** The tools every task is limited to; a caller's `tools` can only narrow it. @default every tool */
  readonly tools?: ToolSelection;
  /**
   * Strings never to show in logs, errors, results or capabilities (tokens, credentials); provider keys and the pool's
   * `secrets` (its upstreams' credentials) are added. @default []
   */
  readonly secrets?: readonly string[];
  /** On `close()`, how long running tasks may finish before they are cancelled with `shutdown`. @default TASK_DEFAULTS.shutdownGraceMs (10_000) */
  readonly shutdownGraceMs?: number;
  /** Receives task lifecycle events (as `onEvent` subscribers do). */
  readonly onEvent?: (event: TaskEvent) => void;
  /**
   * Webhook endpoints, by name, told of task events (signed, at least once, from an outbox in `store`). A
   * start may name one in `webhook`; an endpoint with `all: true` is told of every task. @default {}
   */
  readonly webhooks?: Readonly<Record<string, WebhookEndpoint>>;
  /**
   * Push notifications: receivers callers give for their own tasks (A2A push notification configs), within
   * the operator's allow-list, told of each transition through the webhooks' outbox (`service.push`).
   * @default none: `service.push` is undefined
   */
  readonly push?: PushOptions;
}

/**
 * What an agent serving Klym's tasks needs, whatever it serves them over: the tools' arguments (snake_case,
 * as the wire has them, already parsed by the edge with the schemas of `task-request.ts`: the MCP SDK with
 * the tools' input schemas, REST with `parseArgs`) and the caller's principal in, typed views out. A start
 * whose request the server does not allow (a model, a webhook, a tool policy) throws `INVALID_ARGUMENT`
 * naming the field; a method that names a task throws `TASK_NOT_FOUND` when the caller cannot see it.
 */
export interface TaskService extends AsyncDisposable {
  /** The task manager underneath (for code that wants records rather than views). */
  readonly tasks: TaskManager;
  readonly pool: SessionPool;
  /** How long a finished task stays visible before it is evicted, in milliseconds (the manager's `ttlMs`). */
  readonly ttlMs: number;
  /** The push targets of the caller's tasks, when the service has `push` options; else `undefined`. */
  readonly push: TaskPush | undefined;
  /**
   * `start_async_agent_task`: narrows the request to what the server allows and queues it. The same
   * principal with the same `idempotency_key` gets the task it already started, whatever its status.
   * `options.trace` is the W3C trace context the request carried (see `traceCarrierOf`), the parent of the task's spans.
   * @throws {KlymError} `INVALID_ARGUMENT`, `QUOTA_EXCEEDED` (the caller's `perPrincipal.maxQueued`), `TASK_QUEUE_FULL`, `SHUTTING_DOWN`
   */
  start(args: StartTaskArgs, principal: string, options?: StartOptions): Promise<TaskStartView>;
  /**
   * `check_task_status`: a glance of at most 1,200 characters by default; `log_after` pages the log, `full_result`
   * gives the whole answer. A waiting task says its `queue_position`.
   */
  status(args: CheckTaskArgs, principal: string): Promise<TaskStatusView>;
  /** A page of a task's log, entries whole: `{ task_id, after?, limit? }` (limit up to 500). */
  logs(args: TaskLogsArgs, principal: string): Promise<TaskLogPageView>;
  /**
   * `read_task_artifact`: lines of one of the task's artifacts (a big tool result its run kept whole), to
   * the task's owner only. @throws {KlymError} `TASK_NOT_FOUND`, `ARTIFACT_NOT_FOUND`, `INVALID_ARGUMENT`
   */
  readArtifact(args: ReadArtifactArgs, principal: string): Promise<TaskArtifactSliceView>;
  /**
   * `query_task_artifact`: SQL over the task's artifacts in its DuckDB, to the task's owner only, so the
   * evidence of a finished task answers a new question without a new task. At most
   * `TASK_DEFAULTS.queryAnswerChars` of CSV; the answer says how many rows it left out.
   * @throws {KlymError} `TASK_NOT_FOUND`, `ARTIFACT_NOT_FOUND`, `QUERY_FAILED`
   */
  queryArtifacts(args: QueryArtifactsArgs, principal: string, options?: { readonly signal?: AbortSignal }): Promise<TaskQueryView>;
  /**
   * `reply_to_agent_task`: answers the question the caller's task asked (`input_required`); the task is queued to go
   * on with the answer. @throws {KlymError} `TASK_NOT_FOUND`; `TASK_NOT_WAITING` for a task not waiting, or answered already
   */
  reply(args: ReplyTaskArgs, principal: string, options?: { readonly replyId?: string }): Promise<TaskReplyView>;
  /** `cancel_agent_task`: cancels a pending, running or waiting task; a finished one stays as it was, and the answer says so. */
  cancel(args: CancelTaskArgs, principal: string): Promise<TaskCancelView>;
  /** `list_agent_tasks`: `{ status?, cursor?, limit? }` → a page of the caller's tasks, newest first, with a cursor to older ones. */
  list(args: ListTasksArgs, principal: string): Promise<TaskListView>;
  /** `describe_capabilities`: upstreams and their state, the tools a task may use, models, policies, budgets; with `principal`, its quotas and use. */
  capabilities(principal?: string): Promise<CapabilitiesView>;
  /** `GET /api/quota`: the caller's quotas (`perPrincipal`) and its tasks running and waiting now. */
  quota(principal: string): Promise<QuotaView>;
  /** Upstream states and task counts; no URL, no secret. */
  health(): Promise<HealthView>;
  /** Subscribes to task lifecycle events; returns the unsubscribe function. */
  onEvent(listener: (event: TaskEvent) => void): () => void;
  /**
   * Closes the task manager: refuses new tasks, gives running ones `shutdownGraceMs`, then cancels them with
   * `shutdown`; then stops delivering webhooks (what is left in the outbox waits for the next start).
   * Idempotent. Closes neither the pool nor the store.
   */
  close(): Promise<void>;
}

/**
 * Creates the task service over a pool: a task manager with the given options, and the rules a caller's
 * request is narrowed to — the same rules (upstream tool rules, the server's selection, policies,
 * read-only tools) its runs apply, so what `capabilities()` advertises is what a run may call.
 *
 * @throws {KlymError} `CONFIG_INVALID` for an unknown policy in `tools.policy`, or a limit out of range.
 * @example
 * ```ts
 * await using pool = await createSessionPool({ upstreams: { grynya: { url: 'http://127.0.0.1:8000/sse' } } })
 * await using service = createTaskService({ pool, models: ['openai:gpt-4.1-mini'], providers: { openai: { apiKey } } })
 * const { task_id } = await service.start({ prompt: 'Find sessions without a LAST_EVENT' }, 'grynya')
 * const glance = await service.status({ task_id }, 'grynya')
 * ```
 */
export function createTaskService(options: TaskServiceOptions): TaskService {
  const models = options.models !== undefined && options.models.length > 0 ? options.models : TASK_DEFAULTS.models;
  const limits: RequestLimits = {
    models,
    defaultBudget: options.defaultBudget ?? TASK_DEFAULTS.defaultBudget,
    maxBudget: options.maxBudget ?? TASK_DEFAULTS.maxBudget,
    ...(options.systemPrompt === undefined ? {} : { systemPrompt: options.systemPrompt }),
    ...(options.tools === undefined ? {} : { selection: options.tools }),
    ...(options.upstreamTools === undefined ? {} : { upstreams: options.upstreamTools }),
    ...(options.policies === undefined ? {} : { policies: options.policies }),
    ...(options.readOnlyTools === undefined ? {} : { readOnlyTools: options.readOnlyTools }),
    webhooks: Object.keys(options.webhooks ?? {}),
  };
  assertAccessRules(limits);
  const graceMs = options.shutdownGraceMs ?? TASK_DEFAULTS.shutdownGraceMs;
  if (!Number.isFinite(graceMs) || graceMs < 0) throw new KlymError('CONFIG_INVALID', `Expected \`shutdownGraceMs\` to be zero or more, got ${graceMs}`);
  // The manager's settings, resolved once: the manager, its execution and the service read these.
  const settings = resolveTaskSettings(options, options.queue?.shared === true);
  const { taskTimeoutMs } = settings;
  // Resolved once (provider keys and the pool's upstream credentials included) and handed to the manager, the webhooks and capabilities alike.
  const secrets = secretsOf(options.secrets, options.providers, options.pool);
  const redactor = createRedactor(secrets);
  const listeners = new Set<(event: TaskEvent) => void>();
  if (options.onEvent !== undefined) listeners.add(options.onEvent);

  const { pool } = options;
  // The outbox is the tasks' store: without one given, the service makes the in-memory one the manager would, to share it.
  const hooked = Object.keys(options.webhooks ?? {}).length > 0 || options.push !== undefined;
  const ownStore = hooked && options.store === undefined ? createMemoryTaskStore(options.log === undefined ? {} : { log: options.log }) : undefined;
  const store = options.store ?? ownStore;
  let webhooks: WebhookDispatcher | undefined;
  // Resolved (and checked) once, here, so that a bad option fails the service's creation, not its first push;
  // the dispatcher and the push targets share the result (one allow-list, one guarded connection pool).
  const push = options.push === undefined ? undefined : resolvePushOptions(options.push);
  if (hooked && store !== undefined) {
    const dispatcher = createWebhookDispatcher({ store, endpoints: options.webhooks ?? {}, secrets, ...(push === undefined ? {} : { push }) });
    listeners.add((event) => void dispatcher.enqueue(event));
    webhooks = dispatcher;
  }
  const tasks = createTaskManagerWith(settings, {
    ...pick(options, PASSED_WIRING),
    pool,
    ...(store === undefined ? {} : { store }),
    secrets,
    defaults: pick(options, RUN_SETTING_KEYS),
    onEvent: (event) => {
      for (const listener of listeners) {
        try {
          listener(event);
        } catch {
          // One subscriber's failure must not keep the event from the others, nor break the task.
        }
      }
    },
  });
  const listTools = async (): Promise<readonly PoolTool[]> => (await pool.listTools()).tools;
  let closing: Promise<void> | undefined;

  const service: TaskService = {
    tasks,
    pool,
    ttlMs: settings.ttlMs,
    push:
      push === undefined || store === undefined || webhooks === undefined ? undefined : createTaskPush({ tasks, store, dispatcher: webhooks, options: push }),
    async start(args, principal, startOptions) {
      // A start costs the serving thread more than any read, and callers send them in bursts: its work waits
      // for the loop's next check phase, so the requests read in the same turn (Grynya's status polls) are
      // answered first. Under a burst of 16 callers' starts a poll's p50 fell ~25%, its p90 ~30% (#12).
      await new Promise((resolve) => setImmediate(resolve));
      const request = await narrowTaskRequest(args, limits, listTools);
      // With a key used before, this is the earlier task: its own model and budget are what it runs under.
      const task = await tasks.start(request, { principal }, startOptions);
      return {
        task_id: task.id,
        status: task.status,
        ...(task.request.model === undefined ? {} : { model: task.request.model }),
        budget: viewBudgetLimits(task.request.budget ?? {}),
      };
    },
    async status(args, principal) {
      const paging = args.log_after !== undefined;
      const { task, log, artifacts, queuePosition } = await tasks.read(
        args.task_id,
        { principal },
        paging
          ? { after: args.log_after, limit: args.max_log_entries ?? TASK_DEFAULTS.statusLogPageSize }
          : { tail: args.max_log_entries ?? TASK_DEFAULTS.glanceLogEntries },
      );
      const glance = !paging && args.full_result !== true && args.max_log_entries === undefined;
      return viewTaskStatus(task, log, {
        artifacts,
        fullResult: args.full_result ?? false,
        fullEntries: paging,
        taskTimeoutMs,
        ...(queuePosition === undefined ? {} : { queuePosition }),
        ...(glance ? { maxChars: MAX_GLANCE_CHARS } : {}),
      });
    },
    async logs(args, principal) {
      const page = await tasks.logs(
        args.task_id,
        { principal },
        { after: args.after ?? 0, limit: Math.min(args.limit ?? TASK_DEFAULTS.logPageSize, TASK_DEFAULTS.maxLogPageSize) },
      );
      return { task_id: args.task_id, ...viewLogPage(page, true) };
    },
    async readArtifact(args, principal) {
      if (args.original === true) {
        const { artifact, text } = await tasks.artifactOriginal(args.task_id, { principal }, args.artifact);
        const offset = args.offset ?? 0;
        if (offset > 0 && offset >= text.length)
          throw new KlymError(
            'INVALID_ARGUMENT',
            `\`offset\`: ${offset} is past the end of ${artifact.id}'s original text, which has ${text.length} characters`,
          );
        const end = Math.min(text.length, offset + TASK_DEFAULTS.originalPageChars);
        return {
          task_id: args.task_id,
          artifact: viewArtifact(artifact),
          offset,
          text: text.slice(offset, end),
          ...(end < text.length ? { next_offset: end } : {}),
        };
      }
      const slice = await tasks.readArtifact(args.task_id, { principal }, args.artifact, {
        ...(args.offset === undefined ? {} : { offset: args.offset }),
        ...(args.char_offset === undefined ? {} : { charOffset: args.char_offset }),
        ...(args.limit === undefined ? {} : { limit: args.limit }),
      });
      return viewSlice(args.task_id, slice);
    },
    async queryArtifacts(args, principal, call = {}) {
      const answer = await tasks.queryArtifacts(args.task_id, { principal }, args.sql, { ...call, pageChars: TASK_DEFAULTS.queryAnswerChars });
      const csv = toCsv(answer, TASK_DEFAULTS.queryAnswerChars);
      const left = answer.rowCountExact ? `${answer.rowCount - csv.rows}` : `more than ${answer.rowCount - csv.rows}`;
      return {
        task_id: args.task_id,
        columns: answer.columns,
        rows: answer.rowCount,
        ...(answer.rowCountExact ? {} : { rows_more: true }),
        rows_shown: csv.rows,
        csv: csv.text,
        elapsed_ms: answer.elapsedMs,
        ...(csv.rows < answer.rowCount || !answer.rowCountExact
          ? { note: `${left} rows left out to keep this answer short: aggregate, or page with LIMIT ${csv.rows} OFFSET ${csv.rows}` }
          : {}),
      };
    },
    async reply(args, principal, replying) {
      const task = await tasks.reply(args.task_id, { principal }, replyOfArgs(args), replying);
      const message =
        task.input?.approved === undefined
          ? `Task ${task.id} has your answer and goes on from where it asked`
          : `Task ${task.id} has your decision (${task.input.approved ? 'approved' : 'denied'}) and goes on from where it waited`;
      return { task_id: task.id, status: task.status, message };
    },
    async cancel(args, principal) {
      const outcome = await tasks.cancel(args.task_id, { principal });
      return { task_id: outcome.task.id, cancelled: outcome.cancelled, status: outcome.task.status, message: outcome.message };
    },
    async list(args, principal) {
      const page = await tasks.list({ principal }, args.status === undefined ? {} : { status: args.status }, {
        limit: args.limit ?? TASK_DEFAULTS.listPageSize,
        ...(args.cursor === undefined ? {} : { cursor: args.cursor }),
      });
      return viewTaskList(page);
    },
    async capabilities(principal) {
      const [described, quota] = await Promise.all([
        describeCapabilities(pool, limits, redactor, settings.writeBack.byDefault),
        principal === undefined ? undefined : service.quota(principal),
      ]);
      return quota === undefined ? described : { ...described, quota };
    },
    async quota(principal) {
      return viewQuota(await tasks.usage({ principal }));
    },
    async health() {
      return viewHealth(pool, await tasks.summary());
    },
    onEvent(listener) {
      listeners.add(listener);
      return () => void listeners.delete(listener);
    },
    close() {
      // Tasks first: those the close cancels have their events stored in the outbox before it stops.
      closing ??= (async () => {
        await tasks.close({ graceMs, reason: 'shutdown' });
        await webhooks?.close();
        await ownStore?.close();
      })();
      return closing;
    },
    [Symbol.asyncDispose]: () => service.close(),
  };
  return service;
}

/** The entries of `source` under `keys` that are defined. */
function pick<Source extends object, Key extends keyof Source>(source: Source, keys: readonly Key[]): Partial<Pick<Source, Key>> {
  const picked: Partial<Pick<Source, Key>> = {};
  for (const key of keys) if (source[key] !== undefined) picked[key] = source[key];
  return picked;
}

/**
 * The reply `reply_to_agent_task`'s arguments give: `answer`, or `approve` with its `reason`; never both, never neither.
 * @throws {KlymError} `INVALID_ARGUMENT`
 */
function replyOfArgs(args: ReplyTaskArgs): TaskReply {
  if (args.answer !== undefined && args.approve !== undefined)
    throw new KlymError('INVALID_ARGUMENT', 'Give either `answer` (to a question) or `approve` (to an approval), not both');
  if (args.answer !== undefined) {
    if (args.reason !== undefined) throw new KlymError('INVALID_ARGUMENT', '`reason` goes with `approve`, not with `answer`');
    return { answer: args.answer };
  }
  if (args.approve === undefined) throw new KlymError('INVALID_ARGUMENT', 'Give `answer` (to a question) or `approve` (to an approval)');
  return { approve: args.approve, ...(args.reason === undefined ? {} : { reason: args.reason }) };
}
