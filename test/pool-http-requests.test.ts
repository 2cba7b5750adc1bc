import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createSessionPool, type SessionPool, type UpstreamConfig } from '@klym/core';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { SSEServerTransport } from '@modelcontextprotocol/sdk/server/sse.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).toReversed()) await cleanup();
});

function echoServer(): McpServer {
  const server = new McpServer({ name: 'echo', version: '1.0.0' });
  server.registerTool('echo', { inputSchema: { message: z.string() } }, ({ message }) => ({ content: [{ type: 'text', text: message }] }));
  return server;
}

/**
 * An MCP server over loopback HTTP, both transports: legacy SSE (`GET /sse`, `POST /messages`) and Streamable
 * HTTP (`/mcp`, answering requests as SSE streams, or as JSON with `json`). Records every request's method and headers.
 */
async function httpUpstream({ json = false }: { json?: boolean } = {}) {
  const requests: { method: string; path: string; headers: IncomingHttpHeaders }[] = [];
  const sse = new Map<string, SSEServerTransport>();
  const streamable = new Map<string, StreamableHTTPServerTransport>();
  const http = createServer(async (request, response) => {
    const url = new URL(request.url ?? '/', 'http://upstream');
    requests.push({ method: request.method ?? '', path: url.pathname, headers: request.headers });
    if (url.pathname === '/sse') {
      const transport = new SSEServerTransport('/messages', response);
      sse.set(transport.sessionId, transport);
      await echoServer().connect(transport);
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
      await echoServer().connect(transport);
    }
    await transport.handleRequest(request, response);
  });
  http.listen(0, '127.0.0.1');
  await once(http, 'listening');
  cleanups.push(async () => {
    http.closeAllConnections();
    http.close();
  });
  const base = `http://127.0.0.1:${(http.address() as AddressInfo).port}`;
  return { sseUrl: `${base}/sse`, mcpUrl: `${base}/mcp`, requests };
}

async function pooled(upstream: UpstreamConfig): Promise<SessionPool> {
  const pool = await createSessionPool({ upstreams: { echo: upstream } });
  cleanups.push(() => pool.close({ drainTimeoutMs: 100 }));
  await pool.warmedUp();
  return pool;
}

const headers = { Authorization: 'Bearer t0ken-for-the-upstream', 'X-Request-Source': 'klym', Host: 'echo.internal' };

describe('an HTTP upstream, its messages POSTed through undici.request and its streams through fetch', () => {
  for (const [name, transport, json] of [
    ['legacy SSE', 'sse', false],
    ['Streamable HTTP answering with SSE streams', 'streamable-http', false],
    ['Streamable HTTP answering with JSON', 'streamable-http', true],
  ] as const) {
    it(`over ${name}: calls answer, and every request — POST, GET, DELETE — carries the configured headers and the Host override`, async () => {
      const upstream = await httpUpstream({ json });
      const pool = await pooled({ url: transport === 'sse' ? upstream.sseUrl : upstream.mcpUrl, transport, headers });
      const answers = await Promise.all(['one', 'two', 'three'].map((message) => pool.callTool('echo', 'echo', { message })));
      expect(answers.map((answer) => answer.content)).toEqual([[{ type: 'text', text: 'one' }], [{ type: 'text', text: 'two' }], [{ type: 'text', text: 'three' }]]);

      // Closing terminates a Streamable HTTP session with a DELETE, which carries them too.
      await pool.close();
      expect(new Set(upstream.requests.map((request) => request.method))).toEqual(new Set(transport === 'sse' ? ['GET', 'POST'] : ['GET', 'POST', 'DELETE']));
      for (const request of upstream.requests) {
        expect(request.headers).toMatchObject({ authorization: 'Bearer t0ken-for-the-upstream', 'x-request-source': 'klym', host: 'echo.internal' });
      }
    });
  }
});
