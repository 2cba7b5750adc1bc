import { createSessionPool, type SessionPool, type UpstreamConfig } from '@klym/core';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { HTTP_TRANSPORTS, startHttpUpstream, type HttpUpstream } from './support/http-upstream.ts';

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).toReversed()) await cleanup();
});

function echoServer(): McpServer {
  const server = new McpServer({ name: 'echo', version: '1.0.0' });
  server.registerTool('echo', { inputSchema: { message: z.string() } }, ({ message }) => ({ content: [{ type: 'text', text: message }] }));
  return server;
}

async function httpUpstream({ json = false }: { json?: boolean } = {}): Promise<HttpUpstream> {
  const upstream = await startHttpUpstream(echoServer, { json });
  cleanups.push(() => upstream.close());
  return upstream;
}

async function pooled(upstream: UpstreamConfig): Promise<SessionPool> {
  const pool = await createSessionPool({ upstreams: { echo: upstream } });
  cleanups.push(() => pool.close({ drainTimeoutMs: 100 }));
  await pool.warmedUp();
  return pool;
}

const headers = { Authorization: 'Bearer t0ken-for-the-upstream', 'X-Request-Source': 'klym', Host: 'echo.internal' };

describe('an HTTP upstream, its messages POSTed through undici.request and its streams through fetch', () => {
  for (const [name, transport, json] of HTTP_TRANSPORTS) {
    it(`over ${name}: calls answer, and every request — POST, GET, DELETE — carries the configured headers and the Host override`, async () => {
      const upstream = await httpUpstream({ json });
      const pool = await pooled({ url: transport === 'sse' ? upstream.sseUrl : upstream.mcpUrl, transport, headers });
      const answers = await Promise.all(['one', 'two', 'three'].map((message) => pool.callTool('echo', 'echo', { message })));
      expect(answers.map((answer) => answer.content)).toEqual([
        [{ type: 'text', text: 'one' }],
        [{ type: 'text', text: 'two' }],
        [{ type: 'text', text: 'three' }],
      ]);

      // Closing terminates a Streamable HTTP session with a DELETE, which carries them too.
      await pool.close();
      expect(new Set(upstream.requests.map((request) => request.method))).toEqual(new Set(transport === 'sse' ? ['GET', 'POST'] : ['GET', 'POST', 'DELETE']));
      for (const request of upstream.requests) {
        expect(request.headers).toMatchObject({ authorization: 'Bearer t0ken-for-the-upstream', 'x-request-source': 'klym', host: 'echo.internal' });
      }
    });
  }
});
