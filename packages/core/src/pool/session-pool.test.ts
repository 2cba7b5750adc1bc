import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import {
  CallToolRequestSchema,
  CancelledNotificationSchema,
  ListToolsRequestSchema,
  type CallToolResult,
  type ListToolsResult,
} from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import { createManualClock } from '../../../../test/support/manual-clock.ts';
import { KlymError } from '../errors.ts';
import type { UpstreamCall } from './upstream-status.ts';
import { createInMemoryUpstream } from '../testing/in-memory-upstream.ts';
import { createSessionPool } from './session-pool.ts';

/** A server whose `wait` tool answers after `ms`, or never when `ms` is -1. */
function waitingServer(): McpServer {
  const server = new McpServer({ name: 'waiting', version: '1.0.0' });
  server.registerTool('wait', { inputSchema: { ms: z.number() } }, async ({ ms }, extra) => {
    await new Promise<void>((resolve) => {
      if (ms >= 0) setTimeout(resolve, ms);
      extra.signal.addEventListener('abort', () => resolve(), { once: true });
    });
    return { content: [{ type: 'text', text: `waited ${ms}` }] };
  });
  return server;
}

/** The waiting server, with a `refuse` tool that answers `isError: true`. */
function refusingServer(): McpServer {
  const server = waitingServer();
  server.registerTool('refuse', {}, () => ({ isError: true, content: [{ type: 'text', text: 'no' }] }));
  return server;
}

describe('createSessionPool', () => {
  it('refuses a bad upstream name or option before opening anything', async () => {
    await expect(createSessionPool({ upstreams: { 'bad name': { url: 'http://localhost/' } } })).rejects.toThrow(/upstream name/);
    await expect(createSessionPool({ upstreams: { ok: { url: 'http://localhost/', pool: { max: 0 } } } })).rejects.toMatchObject({
      code: 'CONFIG_INVALID',
      upstream: 'ok',
    });
  });

  it('names the configured upstreams when asked for an unknown one', async () => {
    await using pool = await createSessionPool({ upstreams: { waiting: createInMemoryUpstream(waitingServer) } });
    await expect(pool.callTool('nope', 'wait', { ms: 0 })).rejects.toMatchObject({
      code: 'UPSTREAM_NOT_FOUND',
      message: 'No upstream named "nope"; configured: waiting',
    });
  });

  it('refreshes its cached tool list when the upstream says the list changed', async () => {
    let servers = 0;
    const growing = (): McpServer => {
      servers++;
      const server = new McpServer({ name: 'growing', version: '1.0.0' });
      server.registerTool('grow', {}, () => {
        server.registerTool('grown', {}, () => ({ content: [] }));
        return { content: [{ type: 'text', text: 'grew' }] };
      });
      return server;
    };
    await using pool = await createSessionPool({ upstreams: { growing: createInMemoryUpstream(growing, { pool: { max: 1 } }) } });
    expect((await pool.listTools()).tools.map((tool) => tool.name)).toEqual(['growing__grow']);
    expect((await pool.listTools()).tools).toHaveLength(1);
    await pool.callTool('growing', 'grow');
    await vi.waitFor(async () => {
      expect((await pool.listTools()).tools.map((tool) => tool.name)).toEqual(['growing__grow', 'growing__grown']);
    });
    expect(servers).toBe(1);
    expect(pool.resolveTool('growing__grown')).toEqual({ upstream: 'growing', toolName: 'grown' });
  });

  it('shares one tool listing: a caller that gives up stops waiting, the others still get it, and nothing is cancelled upstream', async () => {
    let listings = 0;
    let cancellations = 0;
    const slow = (): McpServer => {
      const server = waitingServer();
      const list = server.server['_requestHandlers'].get('tools/list');
      server.server.setRequestHandler(ListToolsRequestSchema, async (request, extra) => {
        listings++;
        await new Promise((resolve) => setTimeout(resolve, 100));
        return (await list?.(request, extra)) as ListToolsResult;
      });
      server.server.setNotificationHandler(CancelledNotificationSchema, () => void cancellations++);
      return server;
    };
    await using pool = await createSessionPool({ upstreams: { slow: createInMemoryUpstream(slow) } });
    const impatient = new AbortController();
    const first = pool.listTools({ signal: impatient.signal });
    const second = pool.listTools();
    impatient.abort(new Error('the run was cancelled'));
    await expect(first).resolves.toMatchObject({ upstreams: { slow: { ok: false } } });
    await expect(second).resolves.toMatchObject({ upstreams: { slow: { ok: true, toolCount: 1 } } });
    expect({ listings, cancellations }).toEqual({ listings: 1, cancellations: 0 });
  });

  it('reports a tool-name collision as that upstream’s error and still lists the others', async () => {
    await using pool = await createSessionPool({
      upstreams: { clashing: createInMemoryUpstream(clashing), waiting: createInMemoryUpstream(waitingServer) },
    });
    const listing = await pool.listTools();
    expect(listing.tools.map((tool) => tool.name)).toEqual(['waiting__wait']);
    const report = listing.upstreams.clashing;
    expect(report?.ok).toBe(false);
    expect(report?.ok === false && report.error).toMatchObject({
      code: 'TOOL_NAME_COLLISION',
      message: 'Upstream "clashing" has tools "read.file" and "read_file" that both map to "clashing__read_file"',
    });
  });

  it('close() lets a borrowed call finish within the drain deadline', async () => {
    const pool = await createSessionPool({ upstreams: { waiting: createInMemoryUpstream(waitingServer) } });
    const call = pool.callTool('waiting', 'wait', { ms: 50 });
    await vi.waitFor(() => expect(pool.status().waiting?.sessions.borrowed).toBe(1));
    await pool.close({ drainTimeoutMs: 2_000 });
    await expect(call).resolves.toMatchObject({ content: [{ text: 'waited 50' }] });
    expect(pool.status().waiting).toMatchObject({ state: 'closed', sessions: { live: 0 } });
  });

  it('close() fails a call still borrowed at the deadline with POOL_CLOSED, and refuses new calls', async () => {
    const pool = await createSessionPool({ upstreams: { waiting: createInMemoryUpstream(waitingServer) } });
    const call = pool.callTool('waiting', 'wait', { ms: -1 });
    await vi.waitFor(() => expect(pool.status().waiting?.sessions.borrowed).toBe(1));
    const closing = pool.close({ drainTimeoutMs: 50 });
    expect(pool.close()).toBe(closing);
    await expect(call).rejects.toMatchObject({ code: 'POOL_CLOSED', upstream: 'waiting' });
    await closing;
    await expect(pool.callTool('waiting', 'wait', { ms: 0 })).rejects.toBeInstanceOf(KlymError);
    await expect(pool.callTool('waiting', 'wait', { ms: 0 })).rejects.toMatchObject({ code: 'POOL_CLOSED' });
  });

  it('cancels upstream only the request of a call cut short — by its caller, or by close() at the deadline', async () => {
    const requests: (string | number)[] = [];
    const cancelled: (string | number)[] = [];
    const watched = (): McpServer => {
      const server = waitingServer();
      const wait = server.server['_requestHandlers'].get('tools/call');
      server.server.setRequestHandler(CallToolRequestSchema, (request, extra) => {
        requests.push(extra.requestId);
        return wait?.(request, extra) as Promise<CallToolResult>;
      });
      server.server.setNotificationHandler(CancelledNotificationSchema, ({ params }) => void cancelled.push(params.requestId ?? 'none'));
      return server;
    };
    const pool = await createSessionPool({ upstreams: { waiting: createInMemoryUpstream(watched, { pool: { max: 1 } }) } });
    await pool.callTool('waiting', 'wait', { ms: 0 });
    const caller = new AbortController();
    const aborted = pool.callTool('waiting', 'wait', { ms: -1 }, { signal: caller.signal });
    await vi.waitFor(() => expect(requests).toHaveLength(2));
    caller.abort(new Error('no longer needed'));
    await expect(aborted).rejects.toMatchObject({ code: 'ABORTED', message: 'The call to waiting/wait was aborted' });
    await vi.waitFor(() => expect(cancelled).toEqual([requests[1]]));

    await pool.callTool('waiting', 'wait', { ms: 0 });
    const cut = pool.callTool('waiting', 'wait', { ms: -1 });
    await vi.waitFor(() => expect(requests).toHaveLength(4));
    await pool.close({ drainTimeoutMs: 50 });
    await expect(cut).rejects.toMatchObject({ code: 'POOL_CLOSED', message: 'The pool closed before the call to upstream "waiting" finished' });
    expect(cancelled).toEqual([requests[1], requests[3]]);
  });

  it('never cancels a request that was answered: none reaches a session idling past connectMs, nor one the pool closes', async () => {
    const cancelled: unknown[] = [];
    const watched = (): McpServer => {
      const server = waitingServer();
      server.server.setNotificationHandler(CancelledNotificationSchema, ({ params }) => void cancelled.push(params));
      return server;
    };
    const clock = createManualClock();
    const pool = await createSessionPool({
      upstreams: { waiting: createInMemoryUpstream(watched, { pool: { min: 2, max: 2 }, timeouts: { connectMs: 50 } }) },
      clock,
    });
    await pool.warmedUp();
    await pool.callTool('waiting', 'wait', { ms: 0 });
    // Past connectMs: when a connect's timer would have fired, had it been left running.
    clock.advance(50);
    await pool.callTool('waiting', 'wait', { ms: 0 });
    await pool.close();
    expect(cancelled).toEqual([]);
  });

  it('counts calls and keeps sessions open between them', async () => {
    await using pool = await createSessionPool({ upstreams: { waiting: createInMemoryUpstream(waitingServer, { pool: { min: 2, max: 2 } }) } });
    await pool.warmedUp();
    expect(pool.status().waiting?.sessions).toMatchObject({ live: 2, idle: 2, opened: 2 });
    await Promise.all([1, 2, 3, 4, 5].map((ms) => pool.callTool('waiting', 'wait', { ms })));
    expect(pool.status().waiting).toMatchObject({
      state: 'ready',
      transport: 'custom',
      sessions: { live: 2, opened: 2, borrowed: 0 },
      calls: { started: 5, succeeded: 5, failed: 0, inFlight: 0 },
    });
    // Each call waited a little: their time is counted, for a mean latency.
    expect(pool.status().waiting?.calls.totalMs).toBeGreaterThan(0);
  });

  it('tells onCall of each tool call once it ended: ok, an isError answer, a failure by its code, whether the tool was listed, and how long it took', async () => {
    const calls: UpstreamCall[] = [];
    const clock = createManualClock();
    await using pool = await createSessionPool({ upstreams: { waiting: createInMemoryUpstream(refusingServer) }, onCall: (call) => calls.push(call), clock });
    await pool.listTools();
    /** Makes the call, and moves the clock on by `ms` while it is in flight. */
    const taking = <T>(ms: number, calling: Promise<T>): Promise<T> => {
      clock.advance(ms);
      return calling;
    };

    await taking(7, pool.callTool('waiting', 'wait', { ms: 0 }));
    await taking(0, pool.callTool('waiting', 'refuse'));
    await expect(taking(3, pool.callTool('waiting', 'wait', { ms: -1 }, { timeoutMs: 50 }))).rejects.toMatchObject({ code: 'UPSTREAM_TIMEOUT' });
    await taking(11, pool.callTool('waiting', 'made-up')).catch(() => {});
    // Listings are not calls.
    await pool.listTools();

    expect(calls).toEqual([
      { upstream: 'waiting', toolName: 'wait', listed: true, outcome: 'ok', durationMs: 7 },
      { upstream: 'waiting', toolName: 'refuse', listed: true, outcome: 'tool-error', durationMs: 0 },
      { upstream: 'waiting', toolName: 'wait', listed: true, outcome: 'UPSTREAM_TIMEOUT', durationMs: 3 },
      { upstream: 'waiting', toolName: 'made-up', listed: false, outcome: expect.stringMatching(/^(tool-error|UPSTREAM_ERROR)$/), durationMs: 11 },
    ]);
    // The pool's own counters read the same clock.
    expect(pool.status().waiting?.calls).toMatchObject({ started: 4, succeeded: 3, failed: 1, totalMs: 21 });
  });
});

function clashing(): McpServer {
  const server = new McpServer({ name: 'clashing', version: '1.0.0' });
  server.registerTool('read.file', {}, () => ({ content: [] }));
  server.registerTool('read_file', {}, () => ({ content: [] }));
  return server;
}
