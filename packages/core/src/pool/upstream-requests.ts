import { LOG_LEVEL_META_KEY } from '@modelcontextprotocol/client';
// The pool hands on the 1.x SDK's types, which the rest of core (the tool catalog, the agent) still speaks:
// the same wire shapes, the v2 client's types only stricter about what a server may add.
import type { CallToolResult, Tool } from '@modelcontextprotocol/client';
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
  // A 2026-07-28 server sends a request's log messages only at the level its `_meta` asks for (none without
  // one); a 2025 server sends them all until told otherwise: ask for all of them, as before.
  const logLevel = session.client.getProtocolEra() === 'modern' ? { [LOG_LEVEL_META_KEY]: 'debug' } : undefined;
  const meta = options.meta === undefined && logLevel === undefined ? undefined : { ...logLevel, ...options.meta };
  const request: ToolRequest = meta === undefined ? { name: toolName, arguments: args } : { name: toolName, arguments: args, _meta: meta };
  if (options.onProgress === undefined) return call.request(session, session.client.callTool(request, { timeout }) as Promise<CallToolResult>);
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
    const answer = session.client.callTool(request, { timeout, onprogress, resetTimeoutOnProgress: true });
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
    // A fresh list each time (the pool keeps its own), which the SDK also keeps for checking tool results' structured content.
    const page = await call.request(session, session.client.listTools(cursor === undefined ? {} : { cursor }, { timeout: requestMs, cacheMode: 'refresh' }));
    tools.push(...(page.tools as Tool[]));
    cursor = page.nextCursor;
  } while (cursor !== undefined);
  return tools;
}
