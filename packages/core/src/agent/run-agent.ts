import { APICallError, type ModelMessage } from 'ai';
import { isKlymError, KlymError } from '../errors.ts';
import { createRedactor, secretsOf } from '../redact.ts';
import { startRunTracing } from './run-tracing.ts';
import type { RunTracing } from './agent-tracing.ts';
import { createToolCatalog, type ToolCatalog } from '../tools/tool-catalog.ts';
import { raceAbort } from '../internal/abort.ts';
import { outsideBudget, resolveBudget, spentBudget, type BudgetHit } from './budget.ts';
import { INPUT_REQUIRED, parkedStep, type AskedQuestion } from './ask-caller.ts';
import { awaitsCaller, continueParkedStep } from './approvals.ts';
import { createCheckpointer, resumeFrom } from './checkpoint.ts';
import { removeOrphanedToolCalls } from './history.ts';
import { resolveModel } from './model-resolver.ts';
import { runStep, type StepInput } from './run-step.ts';
import { checkOptions, setUpRun } from './run-setup.ts';
import { runStepInWindow } from './step-in-window.ts';
import type { AgentRunResult, AgentToolCall, AgentUsage, RunAgentOptions } from './types.ts';
import type { AgentEvent } from './agent-event.ts';
import { addUsage, costOf, priceOf, ZERO_USAGE } from './usage.ts';
import { DEFAULT_MAX_RETRIES } from '../defaults.ts';
import { createArtifactQuery, type ArtifactQuery } from '../artifacts/artifact-query.ts';
import type { ArtifactBackend } from '../artifacts/artifact-types.ts';
import { compactHistory } from '../artifacts/compaction.ts';
import { interruptedPrograms, replayInterrupted } from '../code/code-replay.ts';

/**
 * Runs an LLM over the pool's tools until the task is done: each step is one model call (streamed, for a
 * real provider) plus the tool calls it makes, through the pool, under the run's policies. Ends when the
 * model stops calling tools, a budget runs out (`budget:<name>`), or `signal` aborts (`cancelled`) — always
 * with the text and usage so far. Every step reaches `onEvent`, with secrets removed. With `onCheckpoint` the run can be
 * saved as it goes and, after the process died, continued with `resume`, no tool call sent twice.
 *
 * @throws {KlymError} `CONFIG_INVALID` for unusable options; `MODEL_ERROR` when the model fails after the
 * provider's retries (a `run-end` event with the usage so far comes first).
 * @example
 * ```ts
 * const run = await runAgent({ pool, prompt: 'Count the nodes', model: 'openai:gpt-4.1-mini',
 *   providers: { openai: { apiKey } }, tools: { policy: 'read-only' }, budget: { maxSteps: 10, timeoutMs: 120_000 } })
 * console.log(run.finishReason, run.text)
 * ```
 */
export async function runAgent(options: RunAgentOptions): Promise<AgentRunResult> {
  checkOptions(options);
  const budget = resolveBudget(options.budget);
  const { model, name, streams } = resolveModel(options.model, options.providers);
  // With the pool's upstream credentials: on a runner thread, that thread's own pool's.
  const redactor = createRedactor(secretsOf(options.secrets, options.providers, options.pool));
  let ended = false;
  const emit = (event: AgentEvent): void => {
    // An upstream may still log after the run ended: the run's story is over by then.
    if (ended) return;
    if (event.type === 'run-end') ended = true;
    try {
      // An async listener's rejection is its failure too: caught, it cannot crash the process as unhandled.
      const returned: unknown = options.onEvent?.(redactor.value(event));
      if (returned instanceof Promise) returned.catch(() => {});
    } catch {
      // A listener's failure is its own; the run goes on.
    }
  };
  const price = priceOf(name, options.prices);
  const resume = options.resume;
  const resumed = resume === undefined ? undefined : resumeFrom(resume);
  const started = performance.now();
  // Run time counts what a resumed checkpoint had used, so the time budget spans the restart.
  const elapsed = (): number => Math.round((resume?.elapsedMs ?? 0) + performance.now() - started);

  const controller = new AbortController();
  // The reasons are made when they happen: an error captures its stack when made, which most runs never need.
  const onAbort = (): void => controller.abort(new KlymError('ABORTED', 'The run was cancelled'));
  let timedOut: KlymError | undefined;
  const timeUp = (): void => controller.abort((timedOut = new KlymError('BUDGET_EXCEEDED', `The run's time budget of ${budget.timeoutMs} ms ran out`)));
  if (options.signal?.aborted) onAbort();
  options.signal?.addEventListener('abort', onAbort, { once: true });
  const timeLeft = budget.timeoutMs === undefined ? undefined : budget.timeoutMs - (resume?.elapsedMs ?? 0);
  if (timeLeft !== undefined && timeLeft <= 0) timeUp();
  const timer = timeLeft === undefined || timeLeft <= 0 ? undefined : setTimeout(timeUp, timeLeft);

  let steps = resume?.steps ?? 0;
  let usage: AgentUsage = resume?.usage ?? ZERO_USAGE;
  const texts: string[] = resumed?.texts ?? [];
  // What checkpoints see of `texts`: a copy each time it changes (a listener may keep one), shared until then.
  let savedTexts: readonly string[] = [...texts];
  const toolCalls: AgentToolCall[] = [];
  // Calls of the steps completed, a resumed checkpoint's included (its calls are not in `toolCalls`).
  let callCount = resumed?.toolCalls ?? 0;
  let messages: readonly ModelMessage[] = resumed?.messages ?? [...(options.messages ?? []), { role: 'user', content: options.prompt }];
  const checkpoints = createCheckpointer(options.onCheckpoint, elapsed);
  const finish = (finishReason: string, asked?: AskedQuestion): AgentRunResult => {
    const costUsd = costOf(usage, price);
    emit({ type: 'run-end', finishReason, steps, usage, costUsd, elapsedMs: elapsed() });
    tracing?.end({ finishReason, usage });
    // Tool calls are redacted like events; text and messages stay as the model and tools wrote them.
    return {
      text: texts.join('\n\n'),
      finalText: texts.at(-1) ?? '',
      finishReason,
      steps,
      usage,
      costUsd,
      toolCalls: redactor.value(toolCalls),
      model: name,
      elapsedMs: elapsed(),
      budget,
      messages,
      ...(resume === undefined ? {} : { resumedFrom: resume.steps }),
      ...(asked === undefined ? {} : { asked }),
    };
  };
  const stopped = (): AgentRunResult => {
    if (controller.signal.reason !== timedOut) return finish('cancelled');
    emit({ type: 'budget', name: 'time', limit: budget.timeoutMs ?? 0, used: elapsed() });
    return finish('budget:time');
  };
  const spent = (hit: BudgetHit): AgentRunResult => {
    emit({ type: 'budget', ...hit });
    return finish(`budget:${hit.name}`);
  };
  // Off by default: then no span, no AI SDK telemetry (it costs every step even with nothing listening), no `_meta`.
  const tracing: RunTracing | undefined = options.tracing === undefined ? undefined : await startRunTracing(options.tracing, name, redactor.text);
  // Without a caller's scope the run is one: its sessions of `task`-scoped upstreams close when it ends.
  const scope = options.scope ?? options.pool.openScope('run');
  // The run's own DuckDB, opened at its first query when its artifacts have none (a library's run): closed with the run.
  let ownDuckDb: ArtifactQuery | undefined;
  const ownQuery = (backend: ArtifactBackend): ArtifactQuery => (ownDuckDb ??= createArtifactQuery({ source: backend }));

  try {
    let catalog: ToolCatalog;
    try {
      catalog = await createToolCatalog({
        pool: options.pool,
        ...(options.tools === undefined ? {} : { selection: options.tools }),
        ...(options.upstreamTools === undefined ? {} : { upstreams: options.upstreamTools }),
        ...(options.policies === undefined ? {} : { policies: options.policies }),
        ...(options.readOnlyTools === undefined ? {} : { readOnlyTools: options.readOnlyTools }),
        signal: controller.signal,
      });
    } catch (error) {
      if (controller.signal.aborted) return stopped();
      throw error;
    }
    emit({
      type: 'run-start',
      model: name,
      tools: catalog.allowed.map((tool) => tool.name),
      denied: catalog.tools.flatMap((tool) => (tool.access.allowed ? [] : [{ toolName: tool.name, policy: tool.access.policy }])),
      unavailable: Object.entries(catalog.upstreams).flatMap(([upstream, report]) => (report.ok ? [] : [{ upstream, error: report.error }])),
      budget,
      ...(resume === undefined ? {} : { resumed: { fromStep: resume.steps, interruptedCalls: resumed?.interruptedCalls ?? [] } }),
    });
    if (resume !== undefined) {
      // The checkpoint may already have used up a budget the resumed run is given.
      const hit = spentBudget(budget, usage, costOf(usage, price)) ?? outsideBudget(options.budgetSignal);
      if (hit !== undefined) return spent(hit);
    }
    let currentStep = 0;
    const setup = await setUpRun({
      options,
      resolved: { model, name, streams },
      catalog,
      budget,
      price,
      scope,
      signal: controller.signal,
      checkpoints,
      tracing,
      emit,
      currentStep: () => currentStep,
      usage: () => usage,
      addUsage: (used) => {
        usage = addUsage(usage, used);
      },
      ownQuery,
    });

    if (awaitsCaller(resume)) {
      // The parked step goes on: its approved calls are sent, then it ends, or parks again on its next call to approve.
      currentStep = resume.current.step;
      const {
        asked,
        messages: next,
        made,
      } = await continueParkedStep(resume, { tools: setup.tools, emit, progress: checkpoints, signal: controller.signal, resultText: setup.resultText });
      toolCalls.push(...made);
      if (controller.signal.aborted) return stopped();
      if (asked !== undefined) return finish(INPUT_REQUIRED, asked);
      messages = next;
    } else if (resume !== undefined && interruptedPrograms(resume).length > 0) {
      // A program a crash interrupted runs again from its start, its recorded calls answered from the checkpoint.
      currentStep = resume.current?.step ?? steps + 1;
      messages = await replayInterrupted({ running: setup.coding, checkpoint: resume, messages, checkpoints, signal: controller.signal });
    }

    for (;;) {
      if (controller.signal.aborted) return stopped();
      if (steps >= budget.maxSteps) return spent({ name: 'steps', limit: budget.maxSteps, used: steps });
      currentStep = steps + 1;
      const cleaned = removeOrphanedToolCalls(messages);
      if (cleaned.removed.length > 0) emit({ type: 'orphan-removed', step: currentStep, toolCallIds: cleaned.removed });
      messages = cleaned.messages;
      const compacted = await compactHistory(messages, setup.compaction);
      if (compacted !== undefined) {
        const { messages: kept, ...what } = compacted;
        messages = kept;
        emit({ type: 'history-compacted', step: currentStep, ...what });
      }
      // A budget kept elsewhere has counted the step before (a store's answer), and says here whether it is spent.
      if (options.beforeStep !== undefined && steps > 0) await raceAbort(options.beforeStep(), controller.signal).catch(() => {});
      if (controller.signal.aborted) return stopped();
      const outside = outsideBudget(options.budgetSignal);
      if (outside !== undefined) return spent(outside);
      steps = currentStep;
      checkpoints.beginStep(currentStep, { steps: currentStep - 1, messages, texts: savedTexts, usage, toolCalls: callCount });

      emit({ type: 'step-start', step: currentStep });
      const input: StepInput = {
        step: currentStep,
        model: setup.visibleModel,
        streams,
        system: setup.system,
        messages,
        tools: setup.offered,
        offeredTools: catalog.allowed.length + Object.keys(setup.builtIns).length,
        toolDefinitionChars: setup.toolDefinitionChars,
        messageChars: setup.messageChars,
        resultText: setup.resultText,
        temperature: options.temperature,
        maxRetries: options.maxRetries ?? DEFAULT_MAX_RETRIES,
        signal: controller.signal,
        providerOptions: setup.providerOptions,
        durations: setup.durations,
        accessOf: setup.accessOf,
        emit,
        progress: checkpoints,
        ...(tracing === undefined ? {} : { telemetry: tracing.telemetry }),
      };
      const outcome = await runStepInWindow(input, setup.contextWindow, (sent) =>
        tracing === undefined ? runStep(sent) : tracing.step(currentStep, () => runStep(sent)),
      );
      const before = { steps: currentStep, messages, texts: savedTexts, toolCalls: callCount };
      // A step that asked its caller parks the run: never after an abort or a failure, whose calls are cut off.
      const asks = options.askCaller === true || setup.approvalTools.size > 0;
      const parked = asks && !outcome.aborted && outcome.error === undefined ? parkedStep(outcome.messages, setup.needsApproval) : undefined;
      // A new array, never `push`: the checkpoints handed out hold the old one, and it must not change under them.
      if (outcome.messages.length > 0) messages = messages.concat(outcome.messages);
      if (outcome.text !== '') {
        texts.push(outcome.text);
        savedTexts = [...texts];
      }
      for (const call of outcome.toolCalls) toolCalls.push(call);
      callCount += outcome.toolCalls.length;
      usage = addUsage(usage, outcome.usage);
      const costUsd = costOf(usage, price);
      emit({ type: 'step-end', step: currentStep, usage: outcome.usage, costUsd, elapsedMs: elapsed() });
      if (parked === undefined) checkpoints.endStep({ steps, messages, texts: savedTexts, usage, toolCalls: callCount });
      // The asking step as the one under way, its usage counted: a resume closes it with the answer and goes on with the next.
      else await checkpoints.park({ ...before, usage, current: { step: currentStep, text: outcome.text, calls: parked.calls } });

      if (outcome.aborted) return stopped();
      if (outcome.error !== undefined) throw failed(outcome.error);
      // A budget that could not pay for a map's next call ends the run too, with what was spent: never past it.
      const hit = spentBudget(budget, usage, costUsd) ?? setup.holds.refused();
      if (hit !== undefined) return spent(hit);
      if (parked !== undefined) return finish(INPUT_REQUIRED, parked.asked);
      if (!outcome.continues) return finish(outcome.finishReason ?? 'other');
    }
  } finally {
    clearTimeout(timer);
    options.signal?.removeEventListener('abort', onAbort);
    if (options.scope === undefined) await scope.close();
    await ownDuckDb?.close().catch(() => {});
    // A run that threw before it could say how it ended (its catalog, a store) still closes its span.
    tracing?.end();
  }

  function failed(error: unknown): KlymError {
    // A request too long for the window was not sent: its error says so; anything else is the provider's failure.
    const failure = isKlymError(error, 'CONTEXT_OVERFLOW')
      ? new KlymError('CONTEXT_OVERFLOW', redactor.text(error.message), error.cause === undefined ? {} : { cause: redactor.value(error.cause) })
      : new KlymError('MODEL_ERROR', redactor.text(`Model ${name} failed: ${describeModelError(error)}`), { cause: redactor.value(error) });
    emit({
      type: 'run-end',
      finishReason: 'error',
      steps,
      usage,
      costUsd: costOf(usage, price),
      elapsedMs: elapsed(),
      error: { code: failure.code, message: failure.message },
    });
    tracing?.end({ finishReason: 'error', usage, error: failure });
    return failure;
  }
}

/** A provider failure in one line: the SDK's message (attempts included after retries), and the HTTP status. */
function describeModelError(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const last = (error as { lastError?: unknown }).lastError ?? error;
  const status = APICallError.isInstance(last) && last.statusCode !== undefined ? ` (HTTP ${last.statusCode})` : '';
  return `${error.message.replace(/\bAI_[A-Za-z]+Error: /g, '')}${status}`;
}
