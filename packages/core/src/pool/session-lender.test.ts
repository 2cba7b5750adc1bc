import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { PingRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import { createManualClock } from '../../../../test/support/manual-clock.ts';
import { createInMemoryUpstream } from '../testing/in-memory-upstream.ts';
import { createSessionPool } from './session-pool.ts';

/** A server whose `wait` tool answers after `ms`; counts the sessions it served and the pings it answered. */
function counted() {
  const seen = { sessions: 0, pings: 0 };
  const serve = (): McpServer => {
    seen.sessions++;
    const server = new McpServer({ name: 'counted', version: '1.0.0' });
    server.registerTool('wait', { inputSchema: { ms: z.number() } }, async ({ ms }) => {
      await new Promise((resolve) => setTimeout(resolve, ms));
      return { content: [{ type: 'text', text: `waited ${ms}` }] };
    });
    server.server.setRequestHandler(PingRequestSchema, () => {
      seen.pings++;
      return {};
    });
    return server;
  };
  return { seen, serve };
}

describe('lending sessions', () => {
  it('hands a session that comes back to the callers waiting for it, first come first served, then keeps it idle for the next call', async () => {
    const upstream = counted();
    await using pool = await createSessionPool({ upstreams: { counted: createInMemoryUpstream(upstream.serve, { pool: { min: 1, max: 1 } }) } });
    await pool.warmedUp();
    const done: string[] = [];
    const first = pool.callTool('counted', 'wait', { ms: 30 }).then(() => done.push('first'));
    const waiters = ['second', 'third', 'fourth'].map((name) => pool.callTool('counted', 'wait', { ms: 0 }).then(() => done.push(name)));
    await vi.waitFor(() => expect(pool.status().counted?.sessions).toMatchObject({ borrowed: 1, idle: 0, waiting: 3 }));
    await Promise.all([first, ...waiters]);
    expect(done).toEqual(['first', 'second', 'third', 'fourth']);
    expect(pool.status().counted?.sessions).toEqual({ live: 1, idle: 1, borrowed: 0, waiting: 0, opened: 1, connectAttempts: 1 });

    await pool.callTool('counted', 'wait', { ms: 0 });
    expect(upstream.seen.sessions).toBe(1);
    expect(pool.status().counted?.calls).toMatchObject({ started: 5, succeeded: 5, failed: 0, inFlight: 0 });
  });

  it('pings a session that sat idle past `idlePingMs` before lending it again, and only then', async () => {
    const upstream = counted();
    const clock = createManualClock();
    const config = createInMemoryUpstream(upstream.serve, { pool: { min: 1, max: 1 }, timeouts: { idlePingMs: 100 } });
    await using pool = await createSessionPool({ upstreams: { counted: config }, clock });
    await pool.warmedUp();
    await pool.callTool('counted', 'wait', { ms: 0 });
    await pool.callTool('counted', 'wait', { ms: 0 });
    expect(upstream.seen.pings).toBe(0);
    // Idle a millisecond short of idlePingMs: lent at once.
    clock.advance(99);
    await pool.callTool('counted', 'wait', { ms: 0 });
    expect(upstream.seen.pings).toBe(0);
    // Idle for idlePingMs: the next call is lent its session after a ping.
    clock.advance(100);
    await pool.callTool('counted', 'wait', { ms: 0 });
    expect(upstream.seen.pings).toBe(1);
    await pool.callTool('counted', 'wait', { ms: 0 });
    expect(upstream.seen.pings).toBe(1);
    expect(upstream.seen.sessions).toBe(1);
  });
});
