import type { StartOptions } from '../tasks/task-manager-types.ts';
import { traceCarrierOf } from '../telemetry/trace-context.ts';

/**
 * What a start request's `params._meta` says about the task beside its arguments: the caller's W3C trace
 * context (`traceparent`, `tracestate`), kept whether or not this process traces — a worker that does may
 * run the task. A `traceparent` that is not valid W3C is ignored.
 */
export function startOptionsOf(meta: unknown): StartOptions {
  const trace = traceCarrierOf(meta);
  return trace === undefined ? {} : { trace };
}
