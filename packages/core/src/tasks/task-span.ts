import { ROOT_CONTEXT, trace, type Context } from '@opentelemetry/api';
import type { TaskRecord } from './store/task-types.ts';
import type { ToolCallTracing } from '../telemetry/tool-call-span.ts';
import { carrierOf, contextOf, type TraceCarrier } from '../telemetry/trace-context.ts';
import { failSpan, tracerOf, type TracingOptions } from '../telemetry/tracing.ts';

/** A task's span while one run of it is under way in this process. */
export interface TaskSpan {
  /** The span's W3C context: the parent of the run's spans, here or on the runner thread. */
  readonly carrier: TraceCarrier | undefined;
  /** Traces a call the task makes outside its run (the write-back's `add_node`), as a child of the task's span. */
  readonly toolCalls: ToolCallTracing;
  /** Ends the span with the task as it now is (`undefined`: evicted). */
  end(task: TaskRecord | undefined): void;
}

/**
 * Starts the span of one run of a task, `klym task`: a child of the trace context its start request carried
 * (`task.trace`, from `params._meta`), else a root. A first run starts it when the task was created, so the
 * span covers the time it waited in the queue; a resumed run (after a restart, on another process) starts a
 * span of its own, marked `klym.task.resumed`, in the same trace.
 */
export function startTaskSpan(options: TracingOptions, task: TaskRecord, resumed: boolean, redact: (text: string) => string): TaskSpan {
  const tracer = tracerOf(options);
  const parent: Context = task.trace === undefined ? ROOT_CONTEXT : contextOf(task.trace);
  const span = tracer.startSpan(
    'klym task',
    {
      attributes: {
        'klym.task.id': task.id,
        'klym.task.principal': task.principal,
        ...(task.request.model === undefined ? {} : { 'gen_ai.request.model': task.request.model }),
        ...(resumed ? { 'klym.task.resumed': true } : {}),
      },
      ...(resumed ? {} : { startTime: new Date(task.createdAt) }),
    },
    parent,
  );
  const spanContext = trace.setSpan(parent, span);
  return {
    carrier: carrierOf(span.spanContext()),
    toolCalls: { tracer, parent: () => spanContext, redact },
    end(now) {
      if (now !== undefined) {
        span.setAttributes({
          'klym.task.status': now.status,
          'klym.task.steps': now.usage.steps,
          ...(now.result === undefined ? {} : { 'klym.task.finish_reason': now.result.finishReason }),
          ...(now.cancelReason === undefined ? {} : { 'klym.task.cancel_reason': now.cancelReason }),
        });
        if (now.error !== undefined) failSpan(span, now.error.code, redact(now.error.message));
      }
      span.end();
    },
  };
}
