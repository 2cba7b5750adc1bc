import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { SSEServerTransport } from '@modelcontextprotocol/sdk/server/sse.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';

/** Each way an HTTP upstream answers: its name in a test's title, the pool's `transport`, and `json` for {@link startHttpUpstream}. */
export const HTTP_TRANSPORTS = [
  ['legacy SSE', 'sse', false],
  ['Streamable HTTP answering with SSE streams', 'streamable-http', false],
  ['Streamable HTTP answering with JSON', 'streamable-http', true],
] as const;

/** An MCP server over loopback HTTP, started by {@link startHttpUpstream}. */
export interface HttpUpstream {
  /** Legacy SSE: `GET /sse`, `POST /messages`. */
  readonly sseUrl: string;
  /** Streamable HTTP: `/mcp`. */
  readonly mcpUrl: string;
  /** Every request's method, path and headers, in order. */
  readonly requests: readonly { method: string; path: string; headers: IncomingHttpHeaders }[];
  close(): Promise<void>;
}

/**
 * Serves a fresh `server()` per session over loopback HTTP, both transports: legacy SSE and Streamable HTTP
 * (answering requests as SSE streams, or as JSON with `json`). Records every request's method and headers.
 */
export async function startHttpUpstream(server: () => McpServer, { json = false }: { json?: boolean } = {}): Promise<HttpUpstream> {
  const requests: { method: string; path: string; headers: IncomingHttpHeaders }[] = [];
  const sse = new Map<string, SSEServerTransport>();
  const streamable = new Map<string, StreamableHTTPServerTransport>();
  const http = createServer(async (request, response) => {
    const url = new URL(request.url ?? '/', 'http://upstream');
    requests.push({ method: request.method ?? '', path: url.pathname, headers: request.headers });
    if (url.pathname === '/sse') {
      const transport = new SSEServerTransport('/messages', response);
      sse.set(transport.sessionId, transport);
      await server().connect(transport);
      return;
    }
    if (url.pathname === '/messages') {
      await sse.get(url.searchParams.get('sessionId') ?? '')?.handlePostMessage(request, response);
      return;
    }
    const id = request.headers['mcp-session-id'];
    let transport = typeof id === 'string' ? streamable.get(id) : undefined;
    if (transport === undefined) {
      transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: randomUUID,
        enableJsonResponse: json,
        onsessioninitialized: (sessionId) => void streamable.set(sessionId, transport as StreamableHTTPServerTransport),
      });
      await server().connect(transport);
    }
    await transport.handleRequest(request, response);
  });
  http.listen(0, '127.0.0.1');
  await once(http, 'listening');
  const base = `http://127.0.0.1:${(http.address() as AddressInfo).port}`;
  return {
    sseUrl: `${base}/sse`,
    mcpUrl: `${base}/mcp`,
    requests,
    async close() {
      http.closeAllConnections();
      http.close();
    },
  };
}
