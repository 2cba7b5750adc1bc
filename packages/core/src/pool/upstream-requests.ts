import type { CallToolResult, Tool } from '@modelcontextprotocol/sdk/types.js';
import { KlymError } from '../errors.ts';
import type { InFlightCall } from './in-flight-call.ts';
import type { ResolvedUpstreamConfig } from './upstream-config.ts';
import type { UpstreamSession } from './upstream-session.ts';
import type { CallToolOptions } from './upstream-status.ts';

/** A tool call's request, as the SDK sends it. */
interface ToolRequest {
  name: string;
  arguments: Record<string, unknown>;
  _meta?: Record<string, unknown>;
}

/**
 * One `tools/call` on `session`, cut short with `call`: bounded by `timeoutMs` (the upstream's `requestMs`
 * by default), which progress restarts when the caller listens for it, and then by `timeouts.maxTotalMs`
 * however much progress comes. Internal to the session pool.
 */
export function requestTool(
  config: Pick<ResolvedUpstreamConfig, 'name' | 'requestMs' | 'maxTotalMs'>,
  session: UpstreamSession,
  call: InFlightCall,
  toolName: string,
  args: Record<string, unknown>,
  options: CallToolOptions,
): Promise<CallToolResult> {
  const timeout = options.timeoutMs ?? config.requestMs;
  const request: ToolRequest = options.meta === undefined ? { name: toolName, arguments: args } : { name: toolName, arguments: args, _meta: { ...options.meta } };
  if (options.onProgress === undefined) return call.request(session, session.client.callTool(request, undefined, { timeout }) as Promise<CallToolResult>);
  return requestWithProgress(config, session, call, request, timeout, options.onProgress);
}

/** A call that listens for progress, which restarts its `timeout`: `timeouts.maxTotalMs` bounds it however much progress comes. */
async function requestWithProgress(
  config: Pick<ResolvedUpstreamConfig, 'name' | 'maxTotalMs'>,
  session: UpstreamSession,
  call: InFlightCall,
  request: ToolRequest,
  timeout: number,
  onProgress: NonNullable<CallToolOptions['onProgress']>,
): Promise<CallToolResult> {
  const maxTotalMs = Math.max(timeout, config.maxTotalMs);
  // The SDK checks `maxTotalTimeout` only when progress arrives, and then sends no cancellation: a limit of our own does both.
  const settled = call.failAfter(maxTotalMs, () => {
    const message = `Upstream "${config.name}" did not finish ${request.name} within ${maxTotalMs} ms (timeouts.maxTotalMs), however much progress it reported; it was sent a cancellation`;
    return new KlymError('UPSTREAM_TIMEOUT', message, { upstream: config.name, toolName: request.name });
  });
  try {
    // Progress that comes after the call was cut short, while its session closes, is no longer the caller's.
    const onprogress: typeof onProgress = (progress) => {
      if (call.failure === undefined && !call.aborted) onProgress(progress);
    };
    const answer = session.client.callTool(request, undefined, { timeout, onprogress, resetTimeoutOnProgress: true });
    return (await call.request(session, answer)) as CallToolResult;
  } finally {
    settled();
  }
}

/** Lists every page of the upstream's tools on `session`, each page within `requestMs`. Internal to the session pool. */
export async function requestToolList(requestMs: number, session: UpstreamSession, call: InFlightCall): Promise<readonly Tool[]> {
  const tools: Tool[] = [];
  let cursor: string | undefined;
  do {
    const page = await call.request(session, session.client.listTools(cursor === undefined ? {} : { cursor }, { timeout: requestMs }));
    tools.push(...page.tools);
    cursor = page.nextCursor;
  } while (cursor !== undefined);
  return tools;
}
