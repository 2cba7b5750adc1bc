import type { TelemetryOptions } from 'ai';
import type { ToolCallTracing } from '../telemetry/tool-call-span.ts';
import type { TraceCarrier } from '../telemetry/trace-context.ts';
import type { TracingOptions } from '../telemetry/tracing.ts';
import type { StepOutcome } from './run-step.ts';
import type { AgentUsage } from './types.ts';

// The agent's side of tracing: what a run is given (`AgentTracing`) and what its loop calls (`RunTracing`).
// `agent/run-tracing.ts` implements it on OpenTelemetry, depending on these types; the agent does not
// depend on how a span is made.

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

/** Opens a run's tracing: its span, for `model`, with texts passed through `redact` before they reach a span. */
export type StartRunTracing = (options: AgentTracing, model: string, redact: (text: string) => string) => Promise<RunTracing>;
