import { once } from 'node:events';
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { toNodeHandler } from '@modelcontextprotocol/node';
import { createMcpHandler, McpServer } from '@modelcontextprotocol/server';
import { z } from 'zod';

/** One request a {@link Mcp20260728Upstream} received: its HTTP method, headers and JSON-RPC method. */
export interface Mcp20260728UpstreamRequest {
  readonly httpMethod: string;
  readonly headers: IncomingHttpHeaders;
  /** The JSON-RPC method of its body, if it had one. */
  readonly method: string | undefined;
}

/** A 2026-07-28 MCP server (the v2 SDK's `createMcpHandler`) on a loopback port, which can die and come back. */
export interface Mcp20260728Upstream {
  /** `http://127.0.0.1:<port>/mcp`. */
  readonly url: string;
  readonly port: number;
  readonly requests: readonly Mcp20260728UpstreamRequest[];
  /** Requests refused with a 401, by the token they carried (`''` for none). */
  readonly unauthorized: readonly string[];
  /** Tool calls that reached a tool (`echo`, `wait`, `log`). */
  readonly calls: readonly string[];
  /** Calls of `wait` under way: each ends when its request is cancelled, or when `release()` is called. */
  readonly waiting: number;
  release(): void;
  /** Dies like a killed process: every connection cut, nothing answers. */
  die(): Promise<void>;
  /** Listens again on the same port. */
  restart(): Promise<void>;
  close(): Promise<void>;
}

/**
 * Starts a stateless MCP server built on the v2 SDK, served as the SDK documents it (`createMcpHandler`
 * through `toNodeHandler` from `@modelcontextprotocol/node`): 2026-07-28 to a client that probes
 * `server/discover`, and 2025-11-25 per request (`legacy: 'stateless'`, the handler's default) to one
 * that sends `initialize`. Tools: `echo` (`{ message }`), `wait` (until released or cancelled), `log`
 * (logs `{ message }` at `info`, then answers).
 * With `authorizationServer`, it is an OAuth protected resource (RFC 9728): its metadata names that server,
 * and a request without a bearer token the server says is valid gets a 401 pointing at the metadata.
 */
export async function startMcp20260728Upstream(
  options: { readonly port?: number; readonly authorizationServer?: { readonly issuer: string; isValid(token: string): boolean } } = {},
): Promise<Mcp20260728Upstream> {
  const requests: Mcp20260728UpstreamRequest[] = [];
  const unauthorized: string[] = [];
  const calls: string[] = [];
  const releases = new Set<() => void>();
  const handler = createMcpHandler(() => {
    const server = new McpServer({ name: 'mcp-2026-07-28', version: '1.0.0' }, { capabilities: { logging: {} } });
    server.registerTool('echo', { description: 'Echoes its message', inputSchema: z.object({ message: z.string() }) }, async ({ message }) => {
      calls.push('echo');
      return { content: [{ type: 'text', text: `echo: ${message}` }] };
    });
    server.registerTool('wait', { description: 'Answers when released' }, async (context) => {
      calls.push('wait');
      await new Promise<void>((resolve) => {
        const done = (): void => {
          releases.delete(done);
          resolve();
        };
        releases.add(done);
        context.mcpReq.signal.addEventListener('abort', done, { once: true });
      });
      return { content: [{ type: 'text', text: 'released' }] };
    });
    server.registerTool(
      'log',
      { description: 'Logs its message, then answers', inputSchema: z.object({ message: z.string() }) },
      async ({ message }, context) => {
        calls.push('log');
        await context.mcpReq.log('info', message);
        return { content: [{ type: 'text', text: 'logged' }] };
      },
    );
    return server;
  });
  const serve = toNodeHandler(handler);
  let base = '';
  const listener = async (request: IncomingMessage, response: ServerResponse): Promise<void> => {
    const authorizationServer = options.authorizationServer;
    if (authorizationServer !== undefined && request.url?.startsWith('/.well-known/oauth-protected-resource')) {
      response
        .writeHead(200, { 'content-type': 'application/json' })
        .end(JSON.stringify({ resource: `${base}/mcp`, authorization_servers: [authorizationServer.issuer] }));
      return;
    }
    let body = '';
    for await (const chunk of request) body += String(chunk);
    let method: string | undefined;
    try {
      method = (JSON.parse(body) as { method?: string }).method;
    } catch {
      // A GET, or a body that is no JSON: recorded without a method.
    }
    requests.push({ httpMethod: request.method ?? '', headers: request.headers, method });
    const token = request.headers.authorization?.replace(/^Bearer /, '');
    if (authorizationServer !== undefined && (token === undefined || !authorizationServer.isValid(token))) {
      unauthorized.push(token ?? '');
      const challenge = `Bearer error="invalid_token", resource_metadata="${base}/.well-known/oauth-protected-resource/mcp"`;
      response.writeHead(401, { 'www-authenticate': challenge, 'content-type': 'application/json' }).end('{"error":"invalid_token"}');
      return;
    }
    await serve(request, response, body === '' ? undefined : JSON.parse(body));
  };
  let http = createServer((request, response) => void listener(request, response));
  http.listen(options.port ?? 0, '127.0.0.1');
  await once(http, 'listening');
  const { port } = http.address() as AddressInfo;
  base = `http://127.0.0.1:${port}`;
  // Like a killed process: open streams are cut, not waited for.
  const stop = (): Promise<void> =>
    new Promise((resolve) => {
      if (!http.listening) return resolve();
      http.close(() => resolve());
      http.closeAllConnections();
    });
  const release = (): void => {
    for (const done of releases) done();
  };
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    port,
    requests,
    unauthorized,
    calls,
    get waiting() {
      return releases.size;
    },
    release,
    die: stop,
    async restart() {
      http = createServer((request, response) => void listener(request, response));
      http.listen(port, '127.0.0.1');
      await once(http, 'listening');
    },
    async close() {
      release();
      await stop();
    },
  };
}
