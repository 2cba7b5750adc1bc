import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as delay } from 'node:timers/promises';
import { createSessionPool, type SessionPool } from '@klym/core';
import { createFakeGrynya, type FakeGrynya } from '@klym/fake-grynya';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { SSEServerTransport } from '@modelcontextprotocol/sdk/server/sse.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createManualClock } from './support/manual-clock.ts';
import { freePort } from './support/upstream-servers.ts';

type Kind = 'sse' | 'streamable-http';
const kinds: readonly Kind[] = ['sse', 'streamable-http'];

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).toReversed()) await cleanup();
});

async function pooled(options: Parameters<typeof createSessionPool>[0]): Promise<SessionPool> {
  const pool = await createSessionPool(options);
  cleanups.push(() => pool.close({ drainTimeoutMs: 100 }));
  await pool.warmedUp();
  return pool;
}

async function fake(): Promise<FakeGrynya> {
  const grynya = await createFakeGrynya();
  cleanups.push(() => grynya.close());
  return grynya;
}

async function listen(
  handler: (request: IncomingMessage, response: ServerResponse) => Promise<void>,
  port = 0,
): Promise<{ http: Server; port: number; kill(): Promise<void> }> {
  const http = createServer((request, response) => {
    handler(request, response).catch(() => response.headersSent || response.writeHead(500).end());
  });
  http.listen(port, '127.0.0.1');
  await once(http, 'listening');
  const kill = async (): Promise<void> => {
    if (!http.listening) return;
    const closed = once(http, 'close');
    http.close();
    http.closeAllConnections();
    await closed;
  };
  cleanups.push(kill);
  return { http, port: (http.address() as AddressInfo).port, kill };
}

/** MCP servers of our own on loopback (SSE at /sse, Streamable HTTP at /mcp), counting what they receive. */
interface Loopback {
  readonly port: number;
  readonly stats: { initialize: number; toolCalls: number; cancelled: number };
  url(kind: Kind): string;
  /** Dies like a killed process: connections cut first, then the servers are dropped. */
  kill(): Promise<void>;
}

async function serveOnLoopback(createMcpServer: () => McpServer, port = 0): Promise<Loopback> {
  const stats = { initialize: 0, toolCalls: 0, cancelled: 0 };
  const servers = new Set<McpServer>();
  const sse = new Map<string, SSEServerTransport>();
  const streamable = new Map<string, StreamableHTTPServerTransport>();
  const serve = async (transport: Transport): Promise<void> => {
    const server = createMcpServer();
    servers.add(server);
    await server.connect(transport);
    const handle = transport.onmessage as NonNullable<Transport['onmessage']>;
    transport.onmessage = (message, extra) => {
      const method = 'method' in message ? message.method : undefined;
      if (method === 'initialize') stats.initialize++;
      if (method === 'tools/call') stats.toolCalls++;
      if (method === 'notifications/cancelled') stats.cancelled++;
      handle(message, extra);
    };
  };
  const server = await listen(async (request, response) => {
    const url = new URL(request.url ?? '/', 'http://loopback');
    if (url.pathname === '/sse') {
      const transport = new SSEServerTransport('/messages', response);
      sse.set(transport.sessionId, transport);
      return serve(transport);
    }
    if (url.pathname === '/messages') {
      const transport = sse.get(url.searchParams.get('sessionId') ?? '');
      return transport ? transport.handlePostMessage(request, response) : void response.writeHead(404).end();
    }
    const id = request.headers['mcp-session-id'];
    if (typeof id === 'string') {
      const transport = streamable.get(id);
      return transport ? transport.handleRequest(request, response) : void response.writeHead(404).end();
    }
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: randomUUID,
      onsessioninitialized: (sessionId) => void streamable.set(sessionId, transport),
    });
    await serve(transport);
    await transport.handleRequest(request, response);
  }, port);
  return {
    port: server.port,
    stats,
    url: (kind) => `http://127.0.0.1:${server.port}/${kind === 'sse' ? 'sse' : 'mcp'}`,
    async kill() {
      await server.kill();
      await Promise.allSettled([...servers].map((mcp) => mcp.close()));
    },
  };
}

/** A server with `tools`, each answering its own name; `crawl` reports progress every 20 ms until cancelled, and never answers. */
function toolServer(...tools: string[]): () => McpServer {
  return () => {
    const server = new McpServer({ name: 'loopback', version: '1.0.0' });
    for (const tool of tools) server.registerTool(tool, {}, () => ({ content: [{ type: 'text', text: tool }] }));
    server.registerTool('crawl', {}, async (extra) => {
      // oxlint-disable-next-line no-underscore-dangle -- the protocol's own field name
      const progressToken = extra._meta?.progressToken;
      for (let progress = 1; !extra.signal.aborted; progress++) {
        if (progressToken !== undefined)
          await extra.sendNotification({ method: 'notifications/progress', params: { progressToken, progress } }).catch(() => {});
        await delay(20, undefined, { signal: extra.signal }).catch(() => {});
      }
      return { content: [{ type: 'text', text: 'cancelled' }] };
    });
    return server;
  };
}

/** Follows `promise`: `settled` turns true once it has settled, so a test can say what has not happened yet. */
function settledState(promise: Promise<unknown>): { readonly settled: boolean } {
  const state = { settled: false };
  const settle = (): void => void (state.settled = true);
  promise.then(settle, settle);
  return state;
}

const namesOf = (listing: { tools: readonly { name: string }[] }): string[] => listing.tools.map((tool) => tool.name).toSorted();

describe('the hard maximum `timeouts.maxTotalMs`', () => {
  for (const kind of kinds) {
    it(`over ${kind}: a call that keeps reporting progress still fails with UPSTREAM_TIMEOUT at maxTotalMs, and the upstream is sent a cancellation`, async () => {
      const upstream = await serveOnLoopback(toolServer());
      const clock = createManualClock();
      const pool = await pooled({
        upstreams: { crawler: { url: upstream.url(kind), transport: kind, pool: { max: 1 }, timeouts: { requestMs: 400, maxTotalMs: 1_200 } } },
        clock,
      });
      let progress = 0;
      const calling = pool.callTool('crawler', 'crawl', {}, { onProgress: () => progress++ });
      const outcome = settledState(calling);
      // Progress every 20 ms: by the 22nd, more than the 400 ms request clock (Node's, in the SDK) has passed, so progress restarted it.
      await vi.waitFor(() => expect(progress).toBeGreaterThanOrEqual(22), { timeout: 5_000 });
      // The limit is one timer on the pool's clock, started with the request: not a millisecond early.
      expect(clock.pending()).toContain(1_200);
      clock.advance(1_199);
      await new Promise(setImmediate);
      expect(outcome.settled).toBe(false);
      expect(clock.pending()).toContain(1);
      clock.advance(1);
      const error = await calling.catch((caught: unknown) => caught);

      expect(error).toMatchObject({
        name: 'KlymError',
        code: 'UPSTREAM_TIMEOUT',
        upstream: 'crawler',
        toolName: 'crawl',
        message: expect.stringMatching(/1200 ms.*maxTotalMs/),
      });
      await vi.waitFor(() => expect(upstream.stats.cancelled).toBe(1));
      // An outcome in doubt is never replayed.
      expect(upstream.stats.toolCalls).toBe(1);
    });
  }
});

describe('`timeouts.connectMs`', () => {
  for (const kind of kinds) {
    it(`over ${kind}: an upstream that accepts the connection but never answers its connect (discover, initialize) is reported at connectMs, and not tried twice`, async () => {
      let initializeSeen = 0;
      const silent = await listen(async (request, response) => {
        if (request.method === 'GET') {
          // Legacy SSE: the stream opens and names its message endpoint, then nothing more comes.
          response.writeHead(200, { 'content-type': 'text/event-stream' }).write('event: endpoint\ndata: /messages?sessionId=1\n\n');
          return;
        }
        let body = '';
        for await (const chunk of request) body += String(chunk);
        // The connect's first request: `server/discover` (the era probe) over Streamable HTTP, `initialize` over SSE.
        if (/"(initialize|server\/discover)"/.test(body)) initializeSeen++;
        // Streamable HTTP: the POST is never answered. Legacy SSE: accepted, and the answer never comes on the stream.
        if (kind === 'sse') response.writeHead(202).end('Accepted');
      });
      const url = `http://127.0.0.1:${silent.port}/${kind === 'sse' ? 'sse' : 'mcp'}`;
      const clock = createManualClock();
      // Minutes, so that only the pool's clock reaches them (the SDK's own limit on `initialize` runs on Node's timers).
      const pool = await pooled({
        upstreams: { silent: { url, transport: kind, pool: { min: 0 }, timeouts: { connectMs: 60_000, acquireMs: 120_000 } } },
        clock,
      });

      const calling = pool.callTool('silent', 'anything');
      const outcome = settledState(calling);
      await vi.waitFor(() => expect(initializeSeen).toBe(1));
      // The connect's limit is the one timer on the pool's clock: not a millisecond early.
      expect(clock.pending()).toEqual([60_000]);
      clock.advance(59_999);
      await new Promise(setImmediate);
      expect(outcome.settled).toBe(false);
      expect(clock.pending()).toEqual([1]);
      clock.advance(1);
      const error = await calling.catch((caught: unknown) => caught);

      expect(error).toMatchObject({
        name: 'KlymError',
        code: 'UPSTREAM_UNAVAILABLE',
        upstream: 'silent',
        message: expect.stringContaining('Upstream "silent" is unavailable'),
      });
      expect((error as Error).message).toMatch(/timed out after 60000 ms/);
      // Not twice connectMs: a connect that used up its time is not tried again for the same caller.
      expect(initializeSeen).toBe(1);
      expect(pool.status().silent).toMatchObject({ state: 'down', sessions: { connectAttempts: 1, opened: 0 } });
    });
  }
});

describe('the bounded wait queue', () => {
  it('with every session busy, the caller past `pool.maxWaiting` is refused at once; waiters past `timeouts.acquireMs` get a clear error', async () => {
    const grynya = await fake();
    const pool = await pooled({
      upstreams: { grynya: { url: grynya.sseUrl, transport: 'sse', pool: { min: 1, max: 1, maxWaiting: 2 }, timeouts: { acquireMs: 600 } } },
    });
    grynya.faults.hang = true;
    const holder = new AbortController();
    const hanging = pool.callTool('grynya', 'query_graph', { query: 'RETURN 1' }, { signal: holder.signal }).catch((error: unknown) => error);
    await vi.waitFor(() => expect(grynya.stats.toolCalls).toBe(1));

    const waitingSince = performance.now();
    const waiters = [1, 2].map((index) => pool.callTool('grynya', 'query_graph', { query: `RETURN ${index}` }).catch((error: unknown) => error));
    const waited = settledState(Promise.all(waiters));
    await vi.waitFor(() => expect(pool.status().grynya?.sessions.waiting).toBe(2));

    await expect(pool.callTool('grynya', 'query_graph', { query: 'RETURN 3' })).rejects.toMatchObject({
      code: 'UPSTREAM_UNAVAILABLE',
      upstream: 'grynya',
      message: expect.stringMatching(/Upstream "grynya" is unavailable: .*2 callers already wait.*pool\.maxWaiting/),
    });
    // At once: while the two before it still wait, not after the 600 ms a waiter may wait.
    expect(waited.settled).toBe(false);
    expect(pool.status().grynya?.sessions.waiting).toBe(2);

    for (const error of await Promise.all(waiters)) {
      expect(error).toMatchObject({
        name: 'KlymError',
        code: 'UPSTREAM_UNAVAILABLE',
        upstream: 'grynya',
        message: expect.stringMatching(/Upstream "grynya" is unavailable: no session came free within 600 ms \(1 of 1 busy; timeouts\.acquireMs\)/),
      });
    }
    // generic-pool's timer (Node's, not the pool clock) ends the wait: never before acquireMs.
    expect(performance.now() - waitingSince).toBeGreaterThanOrEqual(580);
    // Callers that never got a session never reached the upstream.
    expect(grynya.stats.calls.query_graph).toBe(1);

    holder.abort();
    await expect(hanging).resolves.toMatchObject({ code: 'ABORTED' });
    grynya.faults.hang = false;
    expect(pool.status().grynya?.sessions.waiting).toBe(0);
    await expect(pool.callTool('grynya', 'query_graph', { query: 'RETURN 4' })).resolves.toMatchObject({
      content: [{ text: expect.stringContaining('success') }],
    });
  });
});

describe('a call whose outcome is unknown is never replayed', () => {
  for (const kind of kinds) {
    const urlOf = (grynya: FakeGrynya): string => (kind === 'sse' ? grynya.sseUrl : grynya.mcpUrl);

    it(`over ${kind}: a call that timed out reached grynya exactly once`, async () => {
      const grynya = await fake();
      const pool = await pooled({ upstreams: { grynya: { url: urlOf(grynya), transport: kind, pool: { min: 1, max: 1 } } } });
      grynya.faults.hang = true;
      await expect(pool.callTool('grynya', 'query_graph', { query: 'RETURN 1' }, { timeoutMs: 200 })).rejects.toMatchObject({
        code: 'UPSTREAM_TIMEOUT',
        upstream: 'grynya',
      });
      expect(grynya.stats.calls.query_graph).toBe(1);
      grynya.faults.hang = false;
      await pool.callTool('grynya', 'query_graph', { query: 'RETURN 2' });
      expect(grynya.stats.calls.query_graph).toBe(2);
    });

    it(`over ${kind}: a call lost when grynya died mid-call reached it exactly once, also after it came back`, async () => {
      const grynya = await fake();
      const pool = await pooled({ upstreams: { grynya: { url: urlOf(grynya), transport: kind, pool: { min: 1, max: 1 } } } });
      grynya.faults.hang = true;
      const call = pool.callTool('grynya', 'query_graph', { query: 'RETURN 1' }).catch((error: unknown) => error);
      await vi.waitFor(() => expect(grynya.stats.toolCalls).toBe(1));
      await grynya.die();
      await expect(call).resolves.toMatchObject({
        code: 'UPSTREAM_UNAVAILABLE',
        upstream: 'grynya',
        message: expect.stringContaining('may or may not have run'),
      });
      grynya.faults.hang = false;
      await grynya.restart();
      await pool.callTool('grynya', 'query_graph', { query: 'RETURN 2' });
      expect(grynya.stats.calls.query_graph).toBe(2);
      expect(grynya.stats.initialize).toBe(2);
    });
  }
});

describe('an upstream that is down, next to one that works', () => {
  it('listTools() reports it as down instead of dropping it, and status() shows its breaker open', async () => {
    const grynya = await fake();
    const deadPort = await freePort();
    const pool = await pooled({
      upstreams: {
        grynya: { url: grynya.sseUrl, transport: 'sse' },
        down: { url: `http://127.0.0.1:${deadPort}/sse`, transport: 'sse', breaker: { failureThreshold: 3, cooldownMs: 60_000 } },
      },
    });

    const listing = await pool.listTools();
    expect(listing.upstreams.grynya).toEqual({ ok: true, toolCount: 5 });
    expect(namesOf(listing)).toContain('grynya__query_graph');
    expect(listing.tools.every((tool) => tool.upstream === 'grynya')).toBe(true);
    expect(listing.upstreams.down).toMatchObject({
      ok: false,
      error: { name: 'KlymError', code: 'UPSTREAM_UNAVAILABLE', upstream: 'down', message: expect.stringContaining('Upstream "down" is unavailable') },
    });

    const down = pool.status().down;
    expect(down).toMatchObject({ state: 'down', breaker: { state: 'open', opens: 1 }, lastError: { code: 'UPSTREAM_UNAVAILABLE' } });
    expect(down?.breaker.opens).toBeGreaterThanOrEqual(1);
    expect(Date.parse(down?.breaker.nextProbeAt ?? '')).toBeGreaterThan(Date.parse(down?.lastError?.at ?? ''));
    expect(pool.status().grynya).toMatchObject({ state: 'ready', breaker: { state: 'closed', opens: 0 } });

    // While the breaker is open, listing again touches no network and still says why.
    const attempts = down?.sessions.connectAttempts;
    const again = await pool.listTools();
    expect(again.upstreams.down).toMatchObject({
      ok: false,
      error: { code: 'UPSTREAM_UNAVAILABLE', message: expect.stringContaining('connects failed in a row') },
    });
    expect(again.upstreams.grynya).toEqual({ ok: true, toolCount: 5 });
    expect(pool.status().down?.sessions.connectAttempts).toBe(attempts);
  });
});

describe('tool lists after a reconnect', () => {
  for (const kind of kinds) {
    it(`over ${kind}: an upstream that comes back with other tools is listed with its new tools`, async () => {
      let upstream = await serveOnLoopback(toolServer('alpha'));
      const pool = await pooled({
        upstreams: { shifty: { url: upstream.url(kind), transport: kind, pool: { min: 1, max: 1 }, breaker: { cooldownMs: 50, maxCooldownMs: 100 } } },
      });
      expect(namesOf(await pool.listTools())).toEqual(['shifty__alpha', 'shifty__crawl']);

      await upstream.kill();
      // The pool saw the session break and tried to replace it.
      await vi.waitFor(() => expect(pool.status().shifty?.state).toBe('down'), { timeout: 5_000 });
      upstream = await serveOnLoopback(toolServer('alpha', 'beta'), upstream.port);

      // A cached list would be answered without a session: this one comes from a fresh session to the new server.
      const listing = await pool.listTools();
      expect(pool.status().shifty).toMatchObject({ state: 'ready', sessions: { opened: 2 } });
      expect(namesOf(listing)).toEqual(['shifty__alpha', 'shifty__beta', 'shifty__crawl']);
      expect(listing.upstreams.shifty).toEqual({ ok: true, toolCount: 3 });
      expect(pool.resolveTool('shifty__beta')).toEqual({ upstream: 'shifty', toolName: 'beta' });
      await expect(pool.callTool('shifty', 'beta')).resolves.toMatchObject({ content: [{ text: 'beta' }] });
      expect(upstream.stats.initialize).toBe(1);
    });
  }
});
