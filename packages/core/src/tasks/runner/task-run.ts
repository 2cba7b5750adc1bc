import type { AgentCheckpoint, AgentRunResult, RunAgentOptions, RunSettings } from '../../agent/types.ts';
import type { AgentEvent } from '../../agent/agent-event.ts';
import type { SessionPool } from '../../pool/session-pool.ts';
import type { SessionScope } from '../../pool/session-scope.ts';
import type { Redactor } from '../../redact.ts';
import type { AgentTracing } from '../../agent/agent-tracing.ts';
import type { TaskPatch, TaskRecord } from '../store/task-types.ts';
import type { ArtifactBackend } from '../../artifacts/artifact-types.ts';
import { countText as count } from '../../internal/count-text.ts';

/** Run options every task gets unless its request says otherwise (and the request may only narrow). */
export type TaskRunDefaults = Omit<RunSettings, 'prompt'>;

/** What a task's run is wired to: the manager's side of it. */
export interface TaskRunWiring {
  readonly pool: SessionPool;
  readonly scope: SessionScope;
  /** The task's artifacts, in its store. */
  readonly artifacts: ArtifactBackend;
  readonly defaults: TaskRunDefaults;
  readonly secrets: readonly string[];
  readonly taskTimeoutMs: number;
  readonly signal: AbortSignal;
  /** Aborted with the hit when the principal's spend for the day runs out. */
  readonly budgetSignal: AbortSignal;
  /** Waits, before each step, until the step before is counted in the principal's day; absent without a daily limit. */
  readonly beforeStep: (() => Promise<void>) | undefined;
  readonly onEvent: (event: AgentEvent) => void;
  readonly onCheckpoint: (checkpoint: AgentCheckpoint) => void;
  /** The checkpoint to continue, for a task resumed after a restart. */
  readonly checkpoint: AgentCheckpoint | undefined;
  /** The run's tracing, its parent the task's span; absent when tracing is off. */
  readonly tracing?: AgentTracing | undefined;
  /** Offer the model `klym__ask_caller`: the manager's `askCaller`, unless the request says `askCaller: false`. */
  readonly askCaller: boolean;
}

/**
 * The `runAgent` options of a task: the manager's defaults, narrowed by its request; the run's time budget
 * capped by the task's own limit (whose timer the manager keeps).
 */
export function runOptionsOf(task: TaskRecord, wiring: TaskRunWiring): RunAgentOptions {
  const { request } = task;
  const { defaults } = wiring;
  const { timeoutMs: runTimeout, ...budget } = { ...defaults.budget, ...request.budget };
  const model = request.model ?? defaults.model;
  return {
    ...defaults,
    pool: wiring.pool,
    scope: wiring.scope,
    artifacts: wiring.artifacts,
    prompt: request.prompt,
    ...(request.systemPrompt === undefined ? {} : { systemPrompt: request.systemPrompt }),
    ...(model === undefined ? {} : { model }),
    ...(request.tools === undefined ? {} : { tools: request.tools }),
    budget: runTimeout !== undefined && runTimeout < wiring.taskTimeoutMs ? { ...budget, timeoutMs: runTimeout } : budget,
    secrets: [...(defaults.secrets ?? []), ...wiring.secrets],
    signal: wiring.signal,
    budgetSignal: wiring.budgetSignal,
    ...(wiring.beforeStep === undefined ? {} : { beforeStep: wiring.beforeStep }),
    onEvent: wiring.onEvent,
    onCheckpoint: wiring.onCheckpoint,
    ...(wiring.checkpoint === undefined ? {} : { resume: wiring.checkpoint }),
    ...(wiring.tracing === undefined ? {} : { tracing: wiring.tracing }),
    ...(wiring.askCaller && request.askCaller !== false ? { askCaller: true } : {}),
    // A task's run can always wait for a decision: the server's approvals are not the caller's to turn off.
    approvals: true,
  };
}

/**
 * What a completed run makes of its task: `completed`, its result (redacted), usage and run time; with
 * `writeBack`, the write marked `pending` in the same write as the status, so that a restart finding it
 * still pending knows a write may have begun (and never makes it twice).
 */
export function completionOf(
  task: TaskRecord,
  result: AgentRunResult,
  context: { readonly checkpoint: AgentCheckpoint | undefined; readonly writeBack: boolean; readonly redact: Redactor },
): TaskPatch {
  const { checkpoint, redact } = context;
  // Every door shows this text (MCP, A2A, REST, webhooks, the graph's write-back): a budget's end says so first.
  const notice = partialNotice(result);
  const first = (text: string): string => (notice === undefined ? text : text === '' ? notice : `${notice}\n\n${text}`);
  return {
    status: 'completed',
    currentStep: 'done',
    result: {
      text: redact.text(first(result.text)),
      finalText: redact.text(first(result.finalText)),
      finishReason: result.finishReason,
      model: result.model,
      // The run lists its own calls; those before a restart are counted in its checkpoint.
      toolCalls: result.toolCalls.length + (checkpoint?.toolCalls ?? 0) + (checkpoint?.current?.calls.length ?? 0),
    },
    usage: {
      steps: result.steps,
      inputTokens: result.usage.inputTokens,
      outputTokens: result.usage.outputTokens,
      totalTokens: result.usage.totalTokens,
      costUsd: result.costUsd,
    },
    elapsedMs: result.elapsedMs,
    ...(context.writeBack ? { writeBack: { status: 'pending', nodeId: `klym_${task.id}`, dayId: '' } } : {}),
  };
}

/**
 * The line a task's result starts with when a budget ended its run (`finishReason` `budget:<name>`): which budget,
 * in the caller's words, its limit and what was spent, and that the answer is partial, so that nobody takes it for
 * a whole one. `undefined` for a run no budget ended.
 * @example `Stopped by the budget (max_tokens 300,000: 298,450 spent) before the work was done: this answer is partial.`
 */
export function partialNotice(result: AgentRunResult): string | undefined {
  if (!result.finishReason.startsWith('budget:')) return undefined;
  const { budget } = result;
  const name = result.finishReason.slice('budget:'.length);
  const which = ((): string => {
    switch (name) {
      case 'tokens':
        return `the budget (max_tokens ${count(budget.maxTokens ?? 0)}: ${count(result.usage.totalTokens)} spent)`;
      case 'cost':
        return `the budget (max_cost_usd ${budget.maxCostUsd ?? 0}: $${(result.costUsd ?? 0).toFixed(4)} spent)`;
      case 'steps':
        return `the budget (max_steps ${count(budget.maxSteps)}: ${count(result.steps)} step${result.steps === 1 ? '' : 's'} taken)`;
      case 'time':
        return `the budget (timeout_ms ${count(budget.timeoutMs ?? 0)}: ${count(result.elapsedMs)} ms spent)`;
      case 'tokensPerDay':
        return "its principal's tokens for the day (maxTokensPerDay)";
      case 'usdPerDay':
        return "its principal's spend for the day (maxUsdPerDay)";
      default:
        return `the budget ${name}`;
    }
  })();
  return `Stopped by ${which} before the work was done: this answer is partial.`;
}
