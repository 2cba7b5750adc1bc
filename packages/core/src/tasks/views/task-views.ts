import type { AgentBudget } from '../../agent/types.ts';
import { DEFAULT_MAX_STEPS, TASK_DEFAULTS } from '../../defaults.ts';
import type { KlymErrorCode } from '../../errors.ts';
import { clipText } from '../../internal/clip-text.ts';
import type { TaskLogPage } from '../store/task-log.ts';
import type { TaskListPage, TaskRecord, TaskStatus } from '../store/task-types.ts';
import type { ArtifactInfo } from '../../artifacts/artifact-types.ts';
import { GLANCE_ARTIFACTS, artifactsView, type TaskArtifactView } from './artifact-views.ts';
import { viewLogPage, type TaskLogEntryView, type TaskLogLineView, type TaskLogView } from './log-views.ts';

// Every view is snake_case JSON for an orchestrating LLM: what it reads, in the words of the tools' arguments.

/** A run's limits as a caller gives and sees them. */
export interface BudgetLimitsView {
  readonly max_steps?: number;
  readonly max_tokens?: number;
  readonly max_cost_usd?: number;
  readonly timeout_ms?: number;
}

/** A task's budget: what it used beside its limits (a limit left out is unlimited). */
export interface TaskBudgetView {
  readonly steps: number;
  readonly max_steps: number;
  readonly tokens: number;
  readonly max_tokens?: number;
  /** Absent while the model has no price. */
  readonly cost_usd?: number;
  readonly max_cost_usd?: number;
  /** The run's time limit (compare with `elapsed_ms`). */
  readonly timeout_ms?: number;
}

/** What `check_task_status` answers. */
export interface TaskStatusView {
  readonly task_id: string;
  readonly status: TaskStatus;
  /** What the task is doing now, in a few words. */
  readonly step: string;
  /** While it waits: how many waiting tasks will start before it (0: it is next), in fair turns between callers. */
  readonly queue_position?: number;
  /** While it is `input_required`: the question its run asked you, whole (or the call to approve, in words); reply with `reply_to_agent_task`. */
  readonly question?: string;
  /** While it waits for approval of a call: `approval`, and the call's tool (its arguments are in `question`); reply with `approve`. */
  readonly input_kind?: 'approval';
  readonly tool?: string;
  readonly asked_at?: string;
  readonly model?: string;
  readonly created_at: string;
  readonly started_at?: string;
  readonly finished_at?: string;
  /** Run time so far (across restarts, when the task was resumed). Absent while pending. */
  readonly elapsed_ms?: number;
  readonly budget: TaskBudgetView;
  /** When the task was resumed after restarts: the step it continued after, each time (the last 10). */
  readonly resumed_from?: readonly number[];
  /** How often it was resumed, when more than the 10 `resumed_from` shows. */
  readonly resumes?: number;
  readonly finish_reason?: string;
  /** The final answer (the last step's text): its first 400 characters unless `full_result`. */
  readonly result?: string;
  readonly result_truncated?: true;
  /** The whole final answer's length, when `result` is cut. */
  readonly result_chars?: number;
  /** Every step's text (`full_result` only, when it says more than `result`). */
  readonly transcript?: string;
  readonly error?: { readonly code: KlymErrorCode; readonly message: string };
  readonly cancel_reason?: string;
  readonly write_back?: { readonly status: 'pending' | 'written' | 'failed'; readonly node_id: string; readonly error?: string };
  /** The task's artifacts (big tool results kept whole; read them with `read_task_artifact`): the newest 5 at a glance. */
  readonly artifacts?: readonly TaskArtifactView[];
  /** How many older artifacts a glance leaves out. */
  readonly artifacts_more?: number;
  readonly log?: TaskLogView;
}

/** A task in a list. */
export interface TaskSummaryView {
  readonly task_id: string;
  readonly status: TaskStatus;
  readonly step: string;
  readonly created_at: string;
  readonly finished_at?: string;
  /** The prompt's first 80 characters. */
  readonly prompt: string;
}

/** What `list_agent_tasks` answers: a page of the caller's tasks, newest first. */
export interface TaskListView {
  readonly tasks: readonly TaskSummaryView[];
  /** Pass as `cursor` for older tasks; absent on the last page. */
  readonly next_cursor?: string;
  /** Tasks matching the filter, on every page. */
  readonly total: number;
}

/** What `start_async_agent_task` answers. */
export interface TaskStartView {
  readonly task_id: string;
  readonly status: TaskStatus;
  readonly model?: string;
  /** The limits the task runs under, after the server's caps. */
  readonly budget: BudgetLimitsView;
}

/** What `reply_to_agent_task` answers: the task, queued to go on with the answer. */
export interface TaskReplyView {
  readonly task_id: string;
  readonly status: TaskStatus;
  readonly message: string;
}

/** What `cancel_agent_task` answers. */
export interface TaskCancelView {
  readonly task_id: string;
  /** Whether this call cancelled it (false when it had already ended). */
  readonly cancelled: boolean;
  readonly status: TaskStatus;
  readonly message: string;
}

/** Options of {@link viewTaskStatus}. */
export interface TaskStatusViewOptions {
  /** The task's artifacts, oldest first: listed (the newest 5 at a glance). @default none */
  readonly artifacts?: readonly ArtifactInfo[];
  /** Give the whole final answer, and every step's text as `transcript`. @default false */
  readonly fullResult?: boolean;
  /** Give log entries whole (paging) instead of one-line summaries. @default false */
  readonly fullEntries?: boolean;
  /**
   * Keep the whole view within this many characters of JSON, leaving out the oldest log lines that do not
   * fit (they stay readable by paging). Only for a glance (not `fullResult`, not `fullEntries`). @default no limit
   */
  readonly maxChars?: number;
  /** The task manager's run-time limit: `budget.timeout_ms` shows the smaller of it and the request's. @default none */
  readonly taskTimeoutMs?: number;
  /** How many waiting tasks start before it (`TaskManager.read`'s `queuePosition`), shown while it is `pending`. @default none */
  readonly queuePosition?: number;
  /** @default Date.now() */
  readonly now?: number;
}

/** The longest any glance of a task is, in characters of JSON. */
export const MAX_GLANCE_CHARS = 1_200;

/** A task's free texts, which a view may cut; everything else in a view has a bounded length. */
interface FreeTexts {
  readonly result?: string;
  readonly error?: string;
  readonly step: string;
  readonly finishReason?: string;
  readonly model?: string;
  readonly cancelReason?: string;
  readonly writeBackError?: string;
}

/**
 * The most characters of JSON each free text takes outside `full_result`, in the order a glance within
 * `maxChars` gives them room (after keeping room for one log line): the final answer first (its 400
 * characters are the point of a glance), the write-back's error last. Log lines take what is left, newest first.
 */
const TEXT_LIMITS: readonly (readonly [keyof FreeTexts, number])[] = [
  ['result', TASK_DEFAULTS.resultPreviewChars],
  ['error', 300],
  ['step', 100],
  ['finishReason', 40],
  ['model', 60],
  ['cancelReason', 100],
  ['writeBackError', 120],
];
const MAX_RESUMES_SHOWN = 10;
/** Room kept for the newest log line (of at most `LOG_LINE_CHARS`, in `log-views.ts`) before the free texts share the rest. */
const LOG_LINE_ROOM = 160;

/** A budget in a caller's words. */
export function viewBudgetLimits(budget: AgentBudget): BudgetLimitsView {
  return {
    ...(budget.maxSteps === undefined ? {} : { max_steps: budget.maxSteps }),
    ...(budget.maxTokens === undefined ? {} : { max_tokens: budget.maxTokens }),
    ...(budget.maxCostUsd === undefined ? {} : { max_cost_usd: budget.maxCostUsd }),
    ...(budget.timeoutMs === undefined ? {} : { timeout_ms: budget.timeoutMs }),
  };
}

/**
 * A task as an orchestrating LLM reads it. By default a glance: status, step, budget use beside its
 * limits, elapsed time, the final answer cut at 400 characters, and the log `page` as one-line summaries.
 * With `maxChars` the glance is never longer than that, whatever the task holds: free texts share what
 * the fixed fields leave, in a set order, and the oldest log lines that do not fit are left to paging.
 */
export function viewTaskStatus(task: TaskRecord, page: TaskLogPage | undefined, options: TaskStatusViewOptions = {}): TaskStatusView {
  const full = options.fullResult === true;
  const texts: FreeTexts = {
    step: task.currentStep,
    ...(task.result === undefined ? {} : { result: task.result.finalText, finishReason: task.result.finishReason }),
    ...(task.error === undefined ? {} : { error: task.error.message }),
    ...(task.writeBack?.error === undefined ? {} : { writeBackError: task.writeBack.error }),
    ...(task.cancelReason === undefined ? {} : { cancelReason: task.cancelReason }),
    ...((task.result?.model ?? task.request.model) === undefined ? {} : { model: task.result?.model ?? task.request.model }),
  };
  const now = options.now ?? Date.now();
  const log = page === undefined ? undefined : viewLogPage(page, options.fullEntries === true);
  const artifacts = options.artifacts ?? [];
  const { taskTimeoutMs, queuePosition } = options;
  if (full) return composeStatus(task, texts, log, { now, taskTimeoutMs, queuePosition, transcript: true, artifacts, shownArtifacts: artifacts.length });

  const fitting = options.maxChars !== undefined && options.fullEntries !== true;
  const context = { now, taskTimeoutMs, queuePosition, artifacts, shownArtifacts: GLANCE_ARTIFACTS };
  if (!fitting) return composeStatus(task, cutTexts(texts, Number.POSITIVE_INFINITY), log, context);
  const maxChars = options.maxChars as number;
  const compose = (shown: FreeTexts, entries?: readonly (TaskLogLineView | TaskLogEntryView)[]): TaskStatusView =>
    composeStatus(task, shown, log === undefined || entries === undefined ? log : { ...log, entries }, context);
  const reserved = (log?.entries.length ?? 0) > 0 ? LOG_LINE_ROOM : 0;
  const shown = cutTexts(texts, maxChars - reserved - JSON.stringify(compose(cutTexts(texts, 0), [])).length);
  // The newest lines matter most: drop from the oldest until the whole glance fits.
  const entries = [...(log?.entries ?? [])];
  let view = compose(shown, entries);
  while (entries.length > 0 && JSON.stringify(view).length > maxChars) {
    entries.shift();
    view = compose(shown, entries);
  }
  return view;
}

/** Each free text cut to its limit, and all of them together to `room` characters of JSON, in {@link TEXT_LIMITS}' order. */
function cutTexts(texts: FreeTexts, room: number): FreeTexts {
  const cut: { -readonly [Key in keyof FreeTexts]: FreeTexts[Key] } = { ...texts };
  let left = room;
  for (const [key, limit] of TEXT_LIMITS) {
    const text = texts[key];
    if (text === undefined) continue;
    const allowed = Math.min(limit, left);
    const shown = allowed >= 1 ? clipText(text, allowed) : '';
    cut[key] = shown;
    left -= JSON.stringify(shown).length - 2;
  }
  return cut;
}

function composeStatus(
  task: TaskRecord,
  texts: FreeTexts,
  log: TaskLogView | undefined,
  context: {
    readonly now: number;
    readonly taskTimeoutMs: number | undefined;
    readonly queuePosition: number | undefined;
    readonly transcript?: boolean;
    readonly artifacts: readonly ArtifactInfo[];
    /** How many of the newest artifacts to list. */
    readonly shownArtifacts: number;
  },
): TaskStatusView {
  const { result, writeBack } = task;
  const elapsed = elapsedMs(task, context.now);
  const resumes = task.resumes ?? [];
  const cut = result !== undefined && texts.result !== result.finalText;
  return {
    task_id: task.id,
    status: task.status,
    step: texts.step,
    ...(task.status === 'pending' && context.queuePosition !== undefined ? { queue_position: context.queuePosition } : {}),
    ...(task.status === 'input_required' && task.input !== undefined ? { question: task.input.question, asked_at: task.input.askedAt } : {}),
    ...(task.status === 'input_required' && task.input?.kind === 'approval'
      ? { input_kind: 'approval' as const, ...(task.input.call === undefined ? {} : { tool: task.input.call.toolName }) }
      : {}),
    ...(texts.model === undefined ? {} : { model: texts.model }),
    created_at: task.createdAt,
    ...(task.startedAt === undefined ? {} : { started_at: task.startedAt }),
    ...(task.finishedAt === undefined ? {} : { finished_at: task.finishedAt }),
    ...(elapsed === undefined ? {} : { elapsed_ms: elapsed }),
    budget: viewBudget(task, context.taskTimeoutMs),
    ...(resumes.length === 0 ? {} : { resumed_from: resumes.slice(-MAX_RESUMES_SHOWN) }),
    ...(resumes.length > MAX_RESUMES_SHOWN ? { resumes: resumes.length } : {}),
    ...(result === undefined
      ? {}
      : {
          finish_reason: texts.finishReason ?? result.finishReason,
          result: texts.result ?? result.finalText,
          // While a glance is being fitted its texts are emptied, so these are measured as if cut: the longest they can be.
          ...(cut ? { result_truncated: true as const, result_chars: result.finalText.length } : {}),
          ...(context.transcript === true && result.text !== result.finalText ? { transcript: result.text } : {}),
        }),
    ...(task.error === undefined ? {} : { error: { code: task.error.code, message: texts.error ?? task.error.message } }),
    ...(task.cancelReason === undefined ? {} : { cancel_reason: texts.cancelReason ?? task.cancelReason }),
    ...(writeBack === undefined
      ? {}
      : {
          write_back: {
            status: writeBack.status,
            node_id: writeBack.nodeId,
            ...(writeBack.error === undefined ? {} : { error: texts.writeBackError ?? writeBack.error }),
          },
        }),
    ...artifactsView(context.artifacts, context.shownArtifacts),
    ...(log === undefined ? {} : { log }),
  };
}

/** A task in a list. */
export function viewTaskSummary(task: TaskRecord): TaskSummaryView {
  return {
    task_id: task.id,
    status: task.status,
    step: clipText(task.currentStep, 100),
    created_at: task.createdAt,
    ...(task.finishedAt === undefined ? {} : { finished_at: task.finishedAt }),
    prompt: clipText(task.request.prompt, 80),
  };
}

/** A page of tasks. */
export function viewTaskList(page: TaskListPage): TaskListView {
  return { tasks: page.tasks.map(viewTaskSummary), ...(page.nextCursor === undefined ? {} : { next_cursor: page.nextCursor }), total: page.total };
}

function viewBudget(task: TaskRecord, taskTimeoutMs: number | undefined): TaskBudgetView {
  const limits = task.request.budget ?? {};
  const timeout = limits.timeoutMs === undefined ? taskTimeoutMs : taskTimeoutMs === undefined ? limits.timeoutMs : Math.min(limits.timeoutMs, taskTimeoutMs);
  return {
    steps: task.usage.steps,
    max_steps: limits.maxSteps ?? DEFAULT_MAX_STEPS,
    tokens: task.usage.totalTokens,
    ...(limits.maxTokens === undefined ? {} : { max_tokens: limits.maxTokens }),
    ...(task.usage.costUsd === undefined ? {} : { cost_usd: Number(task.usage.costUsd.toFixed(6)) }),
    ...(limits.maxCostUsd === undefined ? {} : { max_cost_usd: limits.maxCostUsd }),
    ...(timeout === undefined ? {} : { timeout_ms: timeout }),
  };
}

/**
 * Run time: the manager's `elapsedMs` (counted across restarts) for a task that was resumed or has
 * completed; otherwise from its timestamps, up to now while it runs. `undefined` while pending.
 */
function elapsedMs(task: TaskRecord, now: number): number | undefined {
  if (task.startedAt === undefined) return undefined;
  const resumed = (task.resumes?.length ?? 0) > 0;
  if (task.elapsedMs !== undefined && (resumed || task.status === 'completed')) return Math.round(task.elapsedMs);
  const end = task.finishedAt === undefined ? now : Date.parse(task.finishedAt);
  return Math.max(0, end - Date.parse(task.startedAt));
}
