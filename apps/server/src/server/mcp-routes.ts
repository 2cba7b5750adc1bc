import { randomUUID } from 'node:crypto';
import type { HttpBindings } from '@hono/node-server';
import { RESPONSE_ALREADY_SENT } from '@hono/node-server/utils/response';
import type { TaskService } from '@klym/core';
import type { Mcp20260728TaskHandler } from '@klym/core/mcp';
import { PROTOCOL_VERSION_META_KEY, WebStandardStreamableHTTPServerTransport, isInitializeRequest, isLegacyRequest } from '@modelcontextprotocol/server';
import { SSEServerTransport } from '@modelcontextprotocol/server-legacy/sse';
import type { Context, Hono } from 'hono';
import type { GuardVariables } from './guards.ts';
import { envelopeError, rpcErrorBody } from './json-rpc.ts';
import { connectKlymMcpServer } from './mcp-server.ts';
import type { McpSessions } from './mcp-sessions.ts';

type Env = { Bindings: Partial<HttpBindings>; Variables: GuardVariables };

const rpcError = (c: Context, status: 400 | 404 | 503, code: number, message: string): Response => c.json(rpcErrorBody(code, message), status);

/**
 * The request's JSON-RPC body — one message or a non-empty batch — or the 400 to answer: `-32700` when it
 * is not JSON, `-32600` when it is JSON but not JSON-RPC (checked here, in front of the SDK's transports).
 */
async function readJsonRpc(c: Context): Promise<{ ok: true; body: unknown } | { ok: false; response: Response }> {
  const text = await c.req.text();
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return { ok: false, response: rpcError(c, 400, -32700, 'Parse error: the body is not valid JSON') };
  }
  const invalid = envelopeError(body);
  return invalid === undefined ? { ok: true, body } : { ok: false, response: c.json(invalid, 400) };
}

const isPlainObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

/**
 * Whether a POST is plainly of the 2025-11-25 era, without asking the SDK: one JSON-RPC request (a string
 * or integer id, a string method) whose `_meta`, if any, makes no envelope claim, under no 2026
 * `MCP-Protocol-Version` header. The SDK's `isLegacyRequest` answers `legacy` for every such body (no
 * claim and no modern header); asking it costs each request its zod checks of the body as a response, an
 * error and a request, and a copy of the headers (~15-20% of a `ping`'s CPU on the serving thread, #42).
 * Anything else (a batch, a notification, a claim, a 2026 header) still goes to the SDK.
 */
function plainlyLegacy(c: Context, body: unknown): boolean {
  if (!isPlainObject(body) || body['jsonrpc'] !== '2.0' || typeof body['method'] !== 'string') return false;
  if (typeof body['id'] !== 'string' && !Number.isSafeInteger(body['id'])) return false;
  const params = body['params'];
  if (params !== undefined && !isPlainObject(params)) return false;
  const meta = params?.['_meta'];
  if (meta !== undefined && (!isPlainObject(meta) || PROTOCOL_VERSION_META_KEY in meta)) return false;
  const version = c.req.header('mcp-protocol-version');
  return version === undefined || /^\s*202[45]-/.test(version);
}

/** What a tool handler sees as `authInfo`: the principal, never the token itself. */
const authInfo = (principal: string) => ({ token: '', clientId: principal, scopes: [] });

/** What the MCP routes serve from. */
export interface McpRoutes {
  readonly service: TaskService;
  /** The 2025-11-25 sessions (Streamable HTTP and legacy SSE). */
  readonly sessions: McpSessions;
  /** The 2026-07-28 handler: stateless, each request served by an idle server of a small stack (built when all are busy). */
  readonly mcp20260728: Mcp20260728TaskHandler;
}

/** Whether a body-less request (GET, DELETE) names the 2026-07-28 era, which has no such requests. */
const namesMcp20260728 = (c: Context): boolean => (c.req.header('mcp-protocol-version') ?? '').startsWith('2026-');

/**
 * Mounts MCP at `/mcp` for both eras, told apart per request by the v2 SDK's own predicate
 * (`isLegacyRequest`: a request is 2026-07-28 when its `_meta` claims the per-request envelope).
 * 2026-07-28 requests go to the stateless `mcp20260728` handler, the principal of each from its own bearer token.
 * 2025-11-25 requests use Streamable HTTP sessions (stateful: `initialize` without a session id opens one;
 * any other request needs `Mcp-Session-Id`, 400 without it, 404 when unknown or another principal's); a GET
 * or DELETE naming the 2026 era is its `405`. Legacy HTTP+SSE is at `GET /sse` + `POST /messages?sessionId=`
 * (the stream needs the Node response that `@hono/node-server` passes as `c.env.outgoing`).
 */
export function mountMcpRoutes(app: Hono<Env>, { service, sessions, mcp20260728 }: McpRoutes): void {
  app.post('/mcp', async (c) => {
    const principal = c.get('principal');
    const parsed = await readJsonRpc(c);
    if (!parsed.ok) return parsed.response;
    if (!plainlyLegacy(c, parsed.body) && !(await isLegacyRequest(c.req.raw, parsed.body))) {
      if (sessions.closed) return rpcError(c, 503, -32000, 'Klym is shutting down');
      return mcp20260728.fetch(c.req.raw, { parsedBody: parsed.body, authInfo: authInfo(principal) });
    }
    const sessionId = c.req.header('mcp-session-id');
    if (sessionId !== undefined) {
      const session = sessions.use(sessionId, 'streamable-http', principal);
      if (session === undefined) return rpcError(c, 404, -32001, 'Session not found');
      const transport = session.transport as WebStandardStreamableHTTPServerTransport;
      return transport.handleRequest(c.req.raw, { parsedBody: parsed.body, authInfo: authInfo(principal) });
    }
    const initializing = Array.isArray(parsed.body) ? parsed.body.some(isInitializeRequest) : isInitializeRequest(parsed.body);
    if (!initializing) return rpcError(c, 400, -32000, 'Bad Request: Mcp-Session-Id header is required');
    if (sessions.closed) return rpcError(c, 503, -32000, 'Klym is shutting down');
    const transport: WebStandardStreamableHTTPServerTransport = new WebStandardStreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      enableJsonResponse: true,
      // Each POST is answered with one JSON body, not an SSE stream of one event: ~20% less of the serving
      // thread's CPU per request. Notifications go on the session's GET stream, which is where Klym sends
      // them anyway.
      onsessioninitialized: (id) => sessions.add({ id, kind: 'streamable-http', transport, server, principal }),
    });
    const server = await connectKlymMcpServer(service, transport, principal);
    const response = await transport.handleRequest(c.req.raw, { parsedBody: parsed.body, authInfo: authInfo(principal) });
    // Refused before a session began (bad Accept, a second initialize in a batch): nothing will ever close this server, and it listens to task events.
    if (transport.sessionId === undefined) await server.close();
    return response;
  });

  const withSession = async (c: Context<Env>): Promise<Response> => {
    if (namesMcp20260728(c)) return mcp20260728.fetch(c.req.raw, { authInfo: authInfo(c.get('principal')) });
    const sessionId = c.req.header('mcp-session-id');
    if (sessionId === undefined) return rpcError(c, 400, -32000, 'Bad Request: Mcp-Session-Id header is required');
    const session = sessions.use(sessionId, 'streamable-http', c.get('principal'));
    if (session === undefined) return rpcError(c, 404, -32001, 'Session not found');
    return (session.transport as WebStandardStreamableHTTPServerTransport).handleRequest(c.req.raw, { authInfo: authInfo(c.get('principal')) });
  };
  app.get('/mcp', withSession);
  app.delete('/mcp', withSession);

  app.get('/sse', async (c) => {
    const outgoing = c.env?.outgoing;
    if (outgoing === undefined) return c.json({ error: { code: 'INTERNAL', message: 'Legacy SSE needs the Node server (@hono/node-server)' } }, 501);
    if (sessions.closed) return c.json({ error: { code: 'SHUTTING_DOWN', message: 'Klym is shutting down' } }, 503);
    const transport = new SSEServerTransport('/messages', outgoing);
    const server = await connectKlymMcpServer(service, transport, c.get('principal'));
    sessions.add({ id: transport.sessionId, kind: 'sse', transport, server, principal: c.get('principal') });
    return RESPONSE_ALREADY_SENT;
  });

  app.post('/messages', async (c) => {
    const sessionId = c.req.query('sessionId') ?? c.req.query('session_id');
    if (sessionId === undefined) return c.json({ error: { code: 'INVALID_ARGUMENT', message: 'The sessionId query parameter is required' } }, 400);
    const session = sessions.use(sessionId, 'sse', c.get('principal'));
    if (session === undefined) return c.json({ error: { code: 'SESSION_NOT_FOUND', message: 'Session not found' } }, 404);
    const parsed = await readJsonRpc(c);
    if (!parsed.ok) return parsed.response;
    const extra = { authInfo: authInfo(c.get('principal')), requestInfo: { headers: Object.fromEntries(c.req.raw.headers) } };
    // The SDK's SSE transport takes one message at a time; a batch's answers come on the stream one by one.
    for (const message of Array.isArray(parsed.body) ? parsed.body : [parsed.body])
      await (session.transport as SSEServerTransport).handleMessage(message, extra);
    return c.text('Accepted', 202);
  });
}
