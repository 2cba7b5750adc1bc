import { classifyInboundRequest, createMcpHandler, type JSONRPCRequest } from '@modelcontextprotocol/server';
import { MCP_TASK_DEFAULTS } from '../defaults.ts';
import type { TaskService } from '../tasks/task-service.ts';
import { createModernTaskServer, type ModernTaskServerOptions } from './modern-task-server.ts';
import { serveTaskListen, taskIdsOf } from './task-listen.ts';

/** Options of {@link createModernTaskHandler}. */
export interface ModernTaskHandlerOptions extends Omit<ModernTaskServerOptions, 'principal'> {
  /** Where the SDK reports what it refused or failed to serve. @default nothing */
  readonly onerror?: (error: Error) => void;
  /** How often an open `subscriptions/listen` stream gets a keep-alive comment, in milliseconds. @default 15_000 */
  readonly keepAliveMs?: number;
}

/** What a caller hands {@link ModernTaskHandler.fetch}: who is asking (already verified) and the body, when it was read. */
export interface ModernRequestOptions {
  readonly authInfo?: { readonly token: string; readonly clientId: string; readonly scopes: string[] };
  readonly parsedBody?: unknown;
}

/** Klym's task tools over protocol revision 2026-07-28, as one web-standard handler. */
export interface ModernTaskHandler {
  /** Answers one 2026-07-28 request; the principal is `authInfo.clientId` (`anonymous` without). */
  fetch(request: Request, options?: ModernRequestOptions): Promise<Response>;
  /** Ends every open listen stream (with its graceful result) and the SDK's in-flight exchanges. */
  close(): Promise<void>;
}

/**
 * Serves Klym's task tools and the Tasks extension over protocol revision 2026-07-28, statelessly: each
 * request gets a fresh v2 SDK server for its caller ({@link createModernTaskServer}), so any front answers any
 * task of the shared store. 2025-era requests are refused (`legacy: 'reject'`): route them elsewhere first
 * (`isLegacyRequest`). A `subscriptions/listen` naming `taskIds` is served here, since the SDK's listen
 * router knows only list-change events: its stream carries `notifications/tasks` of the caller's tasks.
 * Everything else (`server/discover`, the tools, the task methods, and the spec's errors for a malformed
 * request: a missing or unsupported protocol version, headers that disagree with the body) is the SDK's.
 */
export function createModernTaskHandler(service: TaskService, options: ModernTaskHandlerOptions): ModernTaskHandler {
  const pollIntervalMs = options.pollIntervalMs ?? MCP_TASK_DEFAULTS.pollIntervalMs;
  const keepAliveMs = options.keepAliveMs ?? 15_000;
  const handler = createMcpHandler(({ authInfo }) => createModernTaskServer(service, { ...options, pollIntervalMs, principal: principalOf(authInfo) }), {
    legacy: 'reject',
    ...(options.onerror === undefined ? {} : { onerror: options.onerror }),
  });
  const listens = new Set<() => void>();

  return {
    async fetch(request, requestOptions) {
      const body = requestOptions?.parsedBody ?? (request.method === 'POST' ? await request.clone().json().catch(() => undefined) : undefined);
      const listen = taskListenOf(request, body);
      if (listen !== undefined) return serveTaskListen(service, listen, { principal: principalOf(requestOptions?.authInfo), pollIntervalMs, keepAliveMs, signal: request.signal, open: listens, serverInfo: options.info });
      return handler.fetch(request, {
        ...(requestOptions?.authInfo === undefined ? {} : { authInfo: { ...requestOptions.authInfo } }),
        ...(body === undefined ? {} : { parsedBody: body }),
      });
    },
    async close() {
      for (const close of listens) close();
      await handler.close();
    },
  };
}

const optional = <Key extends string>(key: Key, value: string | undefined): { [K in Key]?: string } => (value === undefined ? {} : ({ [key]: value } as { [K in Key]: string }));

/** Who is asking: the verified `authInfo` the caller handed over, `anonymous` without one. */
const principalOf = (authInfo?: { readonly clientId?: string }): string => authInfo?.clientId ?? 'anonymous';

/** The `subscriptions/listen` request for task notifications that `request` is, when it is a well-formed 2026 one. */
function taskListenOf(request: Request, body: unknown): JSONRPCRequest | undefined {
  if ((body as { method?: unknown } | undefined)?.method !== 'subscriptions/listen') return undefined;
  const header = (name: string): string | undefined => request.headers.get(name) ?? undefined;
  const route = classifyInboundRequest({
    httpMethod: request.method,
    body,
    ...optional('protocolVersionHeader', header('mcp-protocol-version')),
    ...optional('mcpMethodHeader', header('mcp-method')),
    ...optional('mcpNameHeader', header('mcp-name')),
  });
  if (route.kind !== 'modern' || route.messageKind !== 'request' || taskIdsOf(route.message) === undefined) return undefined;
  return route.message;
}
