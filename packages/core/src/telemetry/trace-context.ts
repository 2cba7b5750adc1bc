import { createTraceState, ROOT_CONTEXT, trace, TraceFlags, type Context, type SpanContext } from '@opentelemetry/api';

/**
 * A W3C Trace Context as plain data (`traceparent`, and `tracestate` when there is one): what crosses an
 * MCP hop in `params._meta` (SEP-414), a thread in a run's options, and a restart in a task's record.
 */
export interface TraceCarrier {
  readonly traceparent: string;
  readonly tracestate?: string;
}

// Version 00 as W3C defines it; an all-zero trace or span id is invalid, and version ff is forbidden.
const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(?:-.*)?$/;
const INVALID_TRACE_ID = '0'.repeat(32);
const INVALID_SPAN_ID = '0'.repeat(16);
// W3C: at most 32 list members; a receiver may drop a tracestate longer than 512 characters.
const MAX_TRACESTATE_CHARS = 512;

/**
 * The trace context an MCP request carries in `params._meta` (`traceparent`, `tracestate`), or `undefined`
 * when it carries none or one that is not a valid W3C `traceparent` (then the task starts a trace of its own,
 * as an HTTP server does with a malformed header).
 */
export function traceCarrierOf(meta: unknown): TraceCarrier | undefined {
  if (typeof meta !== 'object' || meta === null) return undefined;
  const { traceparent, tracestate } = meta as { traceparent?: unknown; tracestate?: unknown };
  if (typeof traceparent !== 'string' || spanContextOf(traceparent) === undefined) return undefined;
  const state = typeof tracestate === 'string' && tracestate.length > 0 && tracestate.length <= MAX_TRACESTATE_CHARS ? tracestate : undefined;
  return state === undefined ? { traceparent } : { traceparent, tracestate: state };
}

/** A context whose (remote) parent is the carrier's span: spans started in it are its children. */
export function contextOf(carrier: TraceCarrier, base: Context = ROOT_CONTEXT): Context {
  const parent = spanContextOf(carrier.traceparent, carrier.tracestate);
  return parent === undefined ? base : trace.setSpanContext(base, parent);
}

/** The carrier of a span (its `traceparent`, and `tracestate` when it has one), or `undefined` for an invalid one. */
export function carrierOf(spanContext: SpanContext): TraceCarrier | undefined {
  if (!trace.isSpanContextValid(spanContext)) return undefined;
  const flags = (spanContext.traceFlags & TraceFlags.SAMPLED).toString(16).padStart(2, '0');
  const traceparent = `00-${spanContext.traceId}-${spanContext.spanId}-${flags}`;
  const tracestate = spanContext.traceState?.serialize();
  return tracestate === undefined || tracestate === '' ? { traceparent } : { traceparent, tracestate };
}

function spanContextOf(traceparent: string, tracestate?: string): SpanContext | undefined {
  const match = TRACEPARENT.exec(traceparent.trim());
  if (match === null) return undefined;
  const [, version, traceId, spanId, flags] = match as unknown as [string, string, string, string, string];
  if (version === 'ff' || (version === '00' && traceparent.trim().length !== 55)) return undefined;
  if (traceId === INVALID_TRACE_ID || spanId === INVALID_SPAN_ID) return undefined;
  return {
    traceId,
    spanId,
    traceFlags: Number.parseInt(flags, 16),
    isRemote: true,
    ...(tracestate === undefined ? {} : { traceState: createTraceState(tracestate) }),
  };
}
