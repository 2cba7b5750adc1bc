import { classifyInboundRequest, createMcpHandler, type JSONRPCRequest, type McpServer } from '@modelcontextprotocol/server';
import { MCP_TASK_DEFAULTS } from '../defaults.ts';
import type { TaskService } from '../tasks/task-service.ts';
import { createMcp20260728TaskServer, principalOf, type Mcp20260728TaskServerOptions } from './mcp-2026-07-28-task-server.ts';
import { serveTaskListen, taskIdsOf } from './task-listen.ts';

/** Options of {@link createMcp20260728TaskHandler}. */
export interface Mcp20260728TaskHandlerOptions extends Mcp20260728TaskServerOptions {
  /** Where the SDK reports what it refused or failed to serve. @default nothing */
  readonly onerror?: (error: Error) => void;
  /** How often an open `subscriptions/listen` stream gets a keep-alive comment, in milliseconds. @default 15_000 */
  readonly keepAliveMs?: number;
}

/** What a caller hands {@link Mcp20260728TaskHandler.fetch}: who is asking (already verified) and the body, when it was read. */
export interface Mcp20260728RequestOptions {
  readonly authInfo?: { readonly token: string; readonly clientId: string; readonly scopes: string[] };
  readonly parsedBody?: unknown;
}

/** Klym's task tools over protocol revision 2026-07-28, as one web-standard handler. */
export interface Mcp20260728TaskHandler {
  /** Answers one 2026-07-28 request; the principal is `authInfo.clientId` (`anonymous` without). */
  fetch(request: Request, options?: Mcp20260728RequestOptions): Promise<Response>;
  /** Ends every open listen stream (with its graceful result) and the SDK's in-flight exchanges. */
  close(): Promise<void>;
}

/**
 * Serves Klym's task tools and the Tasks extension over protocol revision 2026-07-28, statelessly: nothing of
 * a request outlives it, so any front answers any task of the shared store. The v2 SDK server
 * ({@link createMcp20260728TaskServer}) is built once and serves request after request, each for the principal of
 * its own `authInfo`; the SDK connects a server to one exchange at a time, so requests served at once each
 * take an idle one, and another is built only when none is idle. 2025-era requests are refused
 * (`legacy: 'reject'`): route them elsewhere first (`isLegacyRequest`). A `subscriptions/listen` naming `taskIds` is served here, since the SDK's listen
 * router knows only list-change events: its stream carries `notifications/tasks` of the caller's tasks.
 * Everything else (`server/discover`, the tools, the task methods, and the spec's errors for a malformed
 * request: a missing or unsupported protocol version, headers that disagree with the body) is the SDK's.
 */
export function createMcp20260728TaskHandler(service: TaskService, options: Mcp20260728TaskHandlerOptions): Mcp20260728TaskHandler {
  const pollIntervalMs = options.pollIntervalMs ?? MCP_TASK_DEFAULTS.pollIntervalMs;
  const keepAliveMs = options.keepAliveMs ?? 15_000;
  const idle: McpServer[] = [];
  const build = (): McpServer => {
    const server = createMcp20260728TaskServer(service, { ...options, pollIntervalMs });
    // The SDK calls this once the exchange it served has ended, its transport gone: the server is free again.
    // (One it closed unconnected, a request refused before it was served, is never told: it is simply dropped.)
    server.server.onclose = () => {
      if (idle.length < MAX_IDLE_SERVERS && !idle.includes(server)) idle.push(server);
    };
    return server;
  };
  // Nothing of a request stays on the server to leak into the next: the caller comes from each request's
  // context, and Klym reads a client's capabilities from its request's envelope, never from the server.
  const handler = createMcpHandler(() => idle.pop() ?? build(), {
    legacy: 'reject',
    ...(options.onerror === undefined ? {} : { onerror: options.onerror }),
  });
  const listens = new Set<() => void>();

  return {
    async fetch(request, requestOptions) {
      const body =
        requestOptions?.parsedBody ??
        (request.method === 'POST'
          ? await request
              .clone()
              .json()
              .catch(() => undefined)
          : undefined);
      const listen = taskListenOf(request, body);
      if (listen !== undefined)
        return serveTaskListen(service, listen, {
          principal: principalOf(requestOptions?.authInfo),
          pollIntervalMs,
          keepAliveMs,
          signal: request.signal,
          open: listens,
          serverInfo: options.info,
        });
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

/**
 * Idle servers kept for the requests to come, at most: as many as were served at once, up to this. Past it, a
 * server is dropped after its exchange: a burst beyond it costs a build per extra request, as every request did
 * before servers were reused.
 */
const MAX_IDLE_SERVERS = 16;

const optional = <Key extends string>(key: Key, value: string | undefined): { [K in Key]?: string } =>
  value === undefined ? {} : ({ [key]: value } as { [K in Key]: string });

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
