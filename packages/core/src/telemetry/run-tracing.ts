import { context, trace, type Context, type Span } from '@opentelemetry/api';
import type { TelemetryOptions } from 'ai';
import type { StepOutcome } from '../agent/run-step.ts';
import type { AgentUsage } from '../agent/types.ts';
import type { ToolCallTracing } from './tool-call-span.ts';
import { contextOf, type TraceCarrier } from './trace-context.ts';
import { aiTelemetryOf, errorTypeOf, failSpan, tracerOf, type TracingOptions } from './tracing.ts';

/** Tracing of one `runAgent` run: {@link TracingOptions}, and whose child the run is. */
export interface AgentTracing extends TracingOptions {
  /**
   * The W3C context the run's span is a child of: a task's span (the task manager passes it; it crosses to
   * the runner thread as it is), or a caller's from another process. @default the active context
   */
  readonly parent?: TraceCarrier;
}

/** A traced run's spans, as the agent loop opens and closes them. */
export interface RunTracing {
  /** The AI SDK's telemetry for each step's model call: its OpenTelemetry integration on the run's tracer. */
  readonly telemetry: TelemetryOptions;
  /** What the catalog's tools trace their upstream calls with. */
  readonly toolCalls: ToolCallTracing;
  /** Runs one step under its span (`step <n>`), active while the step runs so that the AI SDK's spans nest in it. */
  step(step: number, run: () => Promise<StepOutcome>): Promise<StepOutcome>;
  /** Ends the run's span, with how the run ended when it is known. Idempotent. */
  end(outcome?: { readonly finishReason: string; readonly usage: AgentUsage; readonly error?: unknown }): void;
}

/**
 * Starts a run's span, `invoke_agent klym` (the GenAI conventions' agent span: `gen_ai.operation.name`
 * `invoke_agent`, `gen_ai.agent.name` `klym`, the model), child of `options.parent` or the active context.
 */
export async function startRunTracing(options: AgentTracing, model: string, redact: (text: string) => string): Promise<RunTracing> {
  const tracer = tracerOf(options);
  const base = options.parent === undefined ? context.active() : contextOf(options.parent, context.active());
  const telemetry = await aiTelemetryOf(options, tracer);
  const span = tracer.startSpan(
    'invoke_agent klym',
    { attributes: { 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': 'klym', 'gen_ai.request.model': model } },
    base,
  );
  const runContext = trace.setSpan(base, span);
  let current: Context = runContext;
  let ended = false;
  return {
    telemetry,
    toolCalls: { tracer, parent: () => current, redact },
    async step(step, run) {
      const stepSpan = tracer.startSpan(`step ${step}`, { attributes: { 'klym.step': step } }, runContext);
      current = trace.setSpan(runContext, stepSpan);
      try {
        const outcome = await context.with(current, run);
        describeStep(stepSpan, outcome, redact);
        return outcome;
      } finally {
        stepSpan.end();
        current = runContext;
      }
    },
    end(outcome) {
      if (ended) return;
      ended = true;
      if (outcome !== undefined) {
        span.setAttributes({ ...usageAttributes(outcome.usage), 'gen_ai.response.finish_reasons': [outcome.finishReason] });
        if (outcome.error !== undefined) failSpan(span, errorTypeOf(outcome.error), redact(messageOf(outcome.error)));
      }
      span.end();
    },
  };
}

function describeStep(span: Span, outcome: StepOutcome, redact: (text: string) => string): void {
  span.setAttributes({
    ...usageAttributes(outcome.usage),
    ...(outcome.finishReason === undefined ? {} : { 'gen_ai.response.finish_reasons': [outcome.finishReason] }),
    'klym.step.tool_calls': outcome.toolCalls.length,
    ...(outcome.aborted ? { 'klym.step.aborted': true } : {}),
  });
  if (outcome.error !== undefined) failSpan(span, errorTypeOf(outcome.error), redact(messageOf(outcome.error)));
}

const usageAttributes = (usage: AgentUsage) => ({ 'gen_ai.usage.input_tokens': usage.inputTokens, 'gen_ai.usage.output_tokens': usage.outputTokens });

const messageOf = (error: unknown): string => (error instanceof Error ? error.message : String(error));
