import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { NodeStreamableHTTPServerTransport } from '@modelcontextprotocol/node';
import { ProtocolErrorCode, isJSONRPCNotification, isJSONRPCRequest, type JSONRPCMessage, type McpServer, type Transport } from '@modelcontextprotocol/server';
import { SSEServerTransport } from '@modelcontextprotocol/server-legacy/sse';
import { checkBigGraph, type BigGraph } from './big-graph.ts';
import { Graph } from './graph.ts';
import { createGrynyaServer, type Faults } from './tools.ts';

/** Options of {@link createFakeGrynya}. */
export interface FakeGrynyaOptions {
  /** Port to listen on; 0 picks a free one. @default 0 */
  readonly port?: number;
  /** Address to bind. @default '127.0.0.1' */
  readonly host?: string;
  /**
   * Host names (without port) the server answers; any other `Host` gets `421`, like the real server inside
   * Docker. @default any host
   */
  readonly allowedHosts?: readonly string[];
  /**
   * A big graph of Event nodes to hold from the start, as {@link FakeGrynya.loadEvents} loads one:
   * `MATCH (e:Event) RETURN e` then answers `events` rows on one line (120,000 make about 21 MB).
   * `seed` (an integer from 0 to 2^32 − 1) picks which events, the same ones every time. @default none
   */
  readonly bigGraph?: { readonly events: number; readonly seed?: number };
}

/** What the fake has seen since it was created (restarts included). */
export interface FakeGrynyaStats {
  /** `initialize` requests: one per session that was opened properly. */
  initialize: number;
  /** Tool calls received, of every tool. */
  toolCalls: number;
  /** Tool calls per tool name. */
  readonly calls: Record<string, number>;
  /** `notifications/cancelled` received. */
  cancelled: number;
  /** Requests refused with 421 for their `Host`. */
  rejectedHost: number;
  /** Requests refused because their session never completed `initialize`. */
  refusedBeforeInitialize: number;
  /** MCP sessions open now, over both transports. */
  sessionsOpen: number;
  /** The `params._meta` of the latest tool calls (the last 100), oldest first: what a client sent besides the arguments, such as a trace context. */
  readonly callMeta: { readonly tool: string; readonly meta: Readonly<Record<string, unknown>> | undefined }[];
}

/** A running fake grynya-mcp-server. */
export interface FakeGrynya extends AsyncDisposable {
  /** Legacy HTTP+SSE endpoint, as the real server serves it: `http://127.0.0.1:<port>/sse`. */
  readonly sseUrl: string;
  /** Streamable HTTP endpoint, for our own tests: `http://127.0.0.1:<port>/mcp`. */
  readonly mcpUrl: string;
  /** `GET` answers `{"status":"ok","falkordb_connected":…}`. */
  readonly healthUrl: string;
  readonly port: number;
  /** The graph; it survives `die()` and `restart()`, as FalkorDB's would. */
  readonly graph: Graph;
  readonly stats: FakeGrynyaStats;
  /** Fault switches; change them at any time. */
  readonly faults: Faults;
  /**
   * Holds a big graph of `events` Event nodes made from `seed`, in place of any before, at any time:
   * `MATCH (e:Event) RETURN e` then answers `{"status": "success", "results": [...]}` with one row per event,
   * each exactly `eventRow(index, seed)`; `bigGraphFacts(events, seed)` tells what they hold. The answer is
   * serialized here, once (about 0.5 s for 120,000 events), and every query after is served from it.
   * @param seed - @default 1
   * @throws {RangeError} for a size outside 0 to 1,000,000 or a seed outside 0 to 2^32 − 1.
   */
  loadEvents(events: number, seed?: number): BigGraph;
  /** Dies like a killed process: connections are cut, nothing answers, sessions are forgotten. */
  die(): Promise<void>;
  /** Listens again on the same port, with no sessions: clients must `initialize` again. */
  restart(): Promise<void>;
  /** Stops for good. Idempotent. */
  close(): Promise<void>;
}

/**
 * Starts an in-memory stand-in for grynya-mcp-server: its exact MCP contract (tool names, argument shapes,
 * JSON-string results with `status`), legacy HTTP+SSE at `/sse` + `/messages/` and Streamable HTTP at
 * `/mcp`, a `Host` allow-list answering 421, requests before `initialize` refused, and fault switches.
 * Answers are written as the real server's Python `json.dumps` writes them (see `pythonJsonDumps`); with
 * `bigGraph`, `query_graph` answers `MATCH (e:Event) RETURN e` with that many rows, as the real one does for a
 * big log graph.
 *
 * @throws {RangeError} for a `bigGraph` size or seed out of range, before listening.
 * @example
 * ```ts
 * await using grynya = await createFakeGrynya({ allowedHosts: ['localhost'] })
 * grynya.faults.hang = true
 * ```
 * @example A big graph: 120,000 Event rows, about 21 MB on one line
 * ```ts
 * await using grynya = await createFakeGrynya({ bigGraph: { events: 120_000, seed: 1 } })
 * const expected = bigGraphFacts(120_000, 1).errorsByService
 * ```
 */
export async function createFakeGrynya(options: FakeGrynyaOptions = {}): Promise<FakeGrynya> {
  const host = options.host ?? '127.0.0.1';
  const allowedHosts = options.allowedHosts === undefined ? undefined : new Set(options.allowedHosts.map((name) => name.toLowerCase()));
  const graph = new Graph();
  if (options.bigGraph !== undefined) {
    checkBigGraph(options.bigGraph.events, options.bigGraph.seed ?? 1, { events: 'bigGraph.events', seed: 'bigGraph.seed' });
    graph.loadEvents(options.bigGraph.events, options.bigGraph.seed);
  }
  const faults: Faults = { delayMs: 0, hang: false, dbDisconnected: false, error: undefined };
  const stats: FakeGrynyaStats = {
    initialize: 0,
    toolCalls: 0,
    calls: {},
    cancelled: 0,
    rejectedHost: 0,
    refusedBeforeInitialize: 0,
    sessionsOpen: 0,
    callMeta: [],
  };
  const sseSessions = new Map<string, SSEServerTransport>();
  const httpSessions = new Map<string, NodeStreamableHTTPServerTransport>();
  const servers = new Set<McpServer>();
  let dying = new AbortController();
  let http: Server | undefined;
  let port = options.port ?? 0;
  let closed: Promise<void> | undefined;

  function recordMeta(params: Record<string, unknown> | undefined): void {
    const meta = params?.['_meta'];
    stats.callMeta.push({ tool: String(params?.['name']), meta: typeof meta === 'object' && meta !== null ? { ...meta } : undefined });
    if (stats.callMeta.length > 100) stats.callMeta.shift();
  }

  /** Connects a fresh MCP server to `transport`, refusing requests until the session is initialized, counting what arrives. */
  async function serve(transport: Transport): Promise<void> {
    const server = createGrynyaServer({
      graph,
      faults,
      dying: dying.signal,
      countCall(tool) {
        stats.toolCalls++;
        stats.calls[tool] = (stats.calls[tool] ?? 0) + 1;
      },
    });
    servers.add(server);
    stats.sessionsOpen++;
    transport.onclose = () => {
      stats.sessionsOpen--;
      servers.delete(server);
    };
    await server.connect(transport);
    const handle = transport.onmessage as NonNullable<Transport['onmessage']>;
    let initialized = false;
    transport.onmessage = (message: JSONRPCMessage, extra) => {
      if (isJSONRPCNotification(message)) {
        if (message.method === 'notifications/initialized') initialized = true;
        if (message.method === 'notifications/cancelled') stats.cancelled++;
      } else if (isJSONRPCRequest(message)) {
        if (message.method === 'initialize') stats.initialize++;
        else if (!initialized && message.method !== 'ping') {
          // What the Python SDK answers a session whose client never initialized it (an EventSource that reconnected).
          stats.refusedBeforeInitialize++;
          void transport.send({
            jsonrpc: '2.0',
            id: message.id,
            error: { code: ProtocolErrorCode.InvalidRequest, message: 'Received request before initialization was complete' },
          });
          return;
        }
      }
      if (isJSONRPCRequest(message) && message.method === 'tools/call') recordMeta(message.params);
      handle(message, extra);
    };
  }

  async function route(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const url = new URL(request.url ?? '/', 'http://fake');
    const hostname = (request.headers.host ?? '').replace(/:\d+$/, '').toLowerCase();
    if (allowedHosts !== undefined && !allowedHosts.has(hostname)) {
      stats.rejectedHost++;
      return reply(response, 421, 'Invalid Host header');
    }
    if (url.pathname === '/health' && request.method === 'GET') {
      return json(response, 200, { status: 'ok', falkordb_connected: !faults.dbDisconnected });
    }
    if (url.pathname === '/sse' && request.method === 'GET') {
      const transport = new SSEServerTransport('/messages/', response);
      sseSessions.set(transport.sessionId, transport);
      response.on('close', () => sseSessions.delete(transport.sessionId));
      return serve(transport);
    }
    if (url.pathname.replace(/\/$/, '') === '/messages' && request.method === 'POST') {
      const id = url.searchParams.get('sessionId') ?? url.searchParams.get('session_id') ?? '';
      const transport = sseSessions.get(id);
      if (transport === undefined) return reply(response, 404, 'Could not find session');
      return transport.handlePostMessage(request, response);
    }
    if (url.pathname === '/mcp') return streamableHttp(request, response);
    return reply(response, 404, 'Not Found');
  }

  async function streamableHttp(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const id = request.headers['mcp-session-id'];
    if (typeof id === 'string') {
      const transport = httpSessions.get(id);
      if (transport === undefined) return json(response, 404, { jsonrpc: '2.0', error: { code: -32001, message: 'Session not found' }, id: null });
      return transport.handleRequest(request, response);
    }
    if (request.method !== 'POST') return json(response, 400, { jsonrpc: '2.0', error: { code: -32000, message: 'Bad Request: no session id' }, id: null });
    const transport = new NodeStreamableHTTPServerTransport({
      sessionIdGenerator: randomUUID,
      onsessioninitialized: (sessionId) => void httpSessions.set(sessionId, transport),
      onsessionclosed: (sessionId) => void httpSessions.delete(sessionId),
    });
    await serve(transport);
    await transport.handleRequest(request, response);
    // A first request that was not `initialize` opened no session: forget the transport.
    if (transport.sessionId === undefined) await transport.close();
  }

  async function listen(): Promise<void> {
    const server = createServer((request, response) => {
      route(request, response).catch((error: unknown) => {
        if (!response.headersSent) reply(response, 500, String(error));
      });
    });
    server.listen(port, host);
    await once(server, 'listening');
    port = (server.address() as AddressInfo).port;
    http = server;
  }

  async function die(): Promise<void> {
    const server = http;
    if (server === undefined) return;
    http = undefined;
    dying.abort();
    dying = new AbortController();
    const stopped = once(server, 'close');
    server.close();
    server.closeAllConnections();
    await stopped;
    // The process is gone: its sessions with it.
    await Promise.allSettled([...servers].map((mcp) => mcp.close()));
    sseSessions.clear();
    httpSessions.clear();
  }

  await listen();
  const base = `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
  const fake: FakeGrynya = {
    sseUrl: `${base}/sse`,
    mcpUrl: `${base}/mcp`,
    healthUrl: `${base}/health`,
    port,
    graph,
    stats,
    faults,
    loadEvents: (events, seed) => graph.loadEvents(events, seed),
    die,
    async restart() {
      if (closed) throw new Error('the fake grynya is closed');
      await die();
      await listen();
    },
    close() {
      closed ??= die();
      return closed;
    },
    [Symbol.asyncDispose]: () => fake.close(),
  };
  return fake;
}

function reply(response: ServerResponse, status: number, text: string): void {
  response.writeHead(status, { 'content-type': 'text/plain' }).end(text);
}

function json(response: ServerResponse, status: number, body: unknown): void {
  response.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
}
