import { context, SpanKind, trace, type Context, type Tracer } from '@opentelemetry/api';
import type { CallToolResult } from '@modelcontextprotocol/client';
import { carrierOf, type TraceCarrier } from './trace-context.ts';
import { errorTypeOf, failSpan } from './tracing.ts';

/** What traces a run's tool calls: the tracer, and where a call's span goes when no span is active. */
export interface ToolCallTracing {
  readonly tracer: Tracer;
  /** The parent when the active context has no span (no context manager registered): the current step's. */
  readonly parent: () => Context;
  /** Applied to an error's message before it becomes the span's status. */
  readonly redact?: (text: string) => string;
}

/** One upstream tool call, as its span names it. */
export interface TracedCall {
  readonly upstream: string;
  /** The tool's name on its upstream (what the upstream's own span calls it). */
  readonly toolName: string;
  /** The model's id of the call, when a model made it. */
  readonly toolCallId?: string;
}

/**
 * Makes one upstream `tools/call` under a span of the OpenTelemetry MCP conventions — `tools/call <tool>`,
 * kind CLIENT, `mcp.method.name`, `gen_ai.tool.name`, `gen_ai.operation.name` `execute_tool`, `error.type`
 * on failure (`tool_error` for a result with `isError`) — and hands `send` the span's W3C context for the
 * request's `params._meta`, so that the upstream's own span is its child. The span is a child of the active
 * one (the AI SDK's `execute_tool`), else of `tracing.parent`.
 */
export async function traceToolCall(
  tracing: ToolCallTracing,
  call: TracedCall,
  send: (meta: TraceCarrier | undefined) => Promise<CallToolResult>,
): Promise<CallToolResult> {
  const active = context.active();
  const parent = trace.getSpan(active) === undefined ? tracing.parent() : active;
  const span = tracing.tracer.startSpan(
    `tools/call ${call.toolName}`,
    {
      kind: SpanKind.CLIENT,
      attributes: {
        'mcp.method.name': 'tools/call',
        'gen_ai.operation.name': 'execute_tool',
        'gen_ai.tool.name': call.toolName,
        'klym.upstream': call.upstream,
        ...(call.toolCallId === undefined ? {} : { 'gen_ai.tool.call.id': call.toolCallId }),
      },
    },
    parent,
  );
  try {
    const result = await send(carrierOf(span.spanContext()));
    if (result.isError === true) failSpan(span, 'tool_error');
    return result;
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    failSpan(span, errorTypeOf(error), tracing.redact === undefined ? message : tracing.redact(message));
    throw error;
  } finally {
    span.end();
  }
}
