import { context, trace, type Context, type Span } from '@opentelemetry/api';
import type { AgentTracing, RunTracing } from './agent-tracing.ts';
import type { StepOutcome } from './run-step.ts';
import type { AgentUsage } from './types.ts';
import { contextOf } from '../telemetry/trace-context.ts';
import { aiTelemetryOf, errorTypeOf, failSpan, tracerOf } from '../telemetry/tracing.ts';

export type { AgentTracing } from './agent-tracing.ts';

/**
 * Starts a run's span, `invoke_agent klym` (the GenAI conventions' agent span: `gen_ai.operation.name`
 * `invoke_agent`, `gen_ai.agent.name` `klym`, the model), child of `options.parent` or the active context: the
 * agent's {@link StartRunTracing} on OpenTelemetry.
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
