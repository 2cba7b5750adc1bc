import { SpanStatusCode, trace, type Span, type Tracer } from '@opentelemetry/api';
import type { TelemetryOptions } from 'ai';
import { isKlymError } from '../errors.ts';

/**
 * Tracing with OpenTelemetry. Off unless given: then Klym starts no span, asks the AI SDK for no telemetry
 * and adds nothing to an upstream call's `_meta`. On, the spans go to `tracer`: with no OpenTelemetry SDK
 * registered, the API's tracer records nothing.
 */
export interface TracingOptions {
  /** The tracer of Klym's spans and the AI SDK's. @default `trace.getTracer('@klym/core')`, the registered provider's */
  readonly tracer?: Tracer;
  /**
   * Record prompts, model output, tool arguments and results in the AI SDK's spans. They may hold what a
   * caller would not want in a tracing backend, and the redactor does not reach span attributes.
   * @default false: the spans tell the shape of a run (names, models, tokens, durations, outcomes), not its content
   */
  readonly recordContent?: boolean;
}

/** The instrumentation scope of Klym's spans. */
export const TRACER_NAME = '@klym/core';

/** The tracer of `options`. */
export const tracerOf = (options: TracingOptions): Tracer => options.tracer ?? trace.getTracer(TRACER_NAME);

/**
 * The AI SDK's telemetry for a traced run: its own OpenTelemetry integration (`@ai-sdk/otel`, loaded only
 * when a run is traced) on `tracer`, given per call, so that nothing is registered globally.
 */
export async function aiTelemetryOf(options: TracingOptions, tracer: Tracer): Promise<TelemetryOptions> {
  const { OpenTelemetry } = await import('@ai-sdk/otel');
  const record = options.recordContent ?? false;
  return { isEnabled: true, recordInputs: record, recordOutputs: record, functionId: 'klym', integrations: new OpenTelemetry({ tracer }) };
}

/** Ends `span`'s story as failed: `error.type` (low cardinality, as the conventions ask) and an ERROR status with `message`. */
export function failSpan(span: Span, errorType: string, message?: string): void {
  span.setAttribute('error.type', errorType);
  span.setStatus({ code: SpanStatusCode.ERROR, ...(message === undefined ? {} : { message }) });
}

/**
 * An error's `error.type`: the JSON-RPC error code an upstream answered (the MCP conventions' choice), else
 * Klym's error code (`UPSTREAM_TIMEOUT`, `UPSTREAM_UNAVAILABLE`, …), else the error's class name.
 */
export function errorTypeOf(error: unknown): string {
  const answered = isKlymError(error) ? (error.code === 'UPSTREAM_ERROR' ? jsonRpcCodeOf(error.cause) : undefined) : jsonRpcCodeOf(error);
  if (answered !== undefined) return String(answered);
  if (isKlymError(error)) return error.code;
  return error instanceof Error ? error.name : 'Error';
}

function jsonRpcCodeOf(error: unknown): number | undefined {
  const code = (error as { code?: unknown } | undefined)?.code;
  return error instanceof Error && error.name === 'McpError' && typeof code === 'number' ? code : undefined;
}
