import type { CallToolResult } from '@modelcontextprotocol/client';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult as UpstreamResult, JSONRPCNotification } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import { createInMemoryUpstream } from '../testing/in-memory-upstream.ts';
import { createSessionPool } from './session-pool.ts';
import type { UpstreamConfig } from './upstream-config.ts';

/**
 * An upstream that keeps state per session, as a browser or a shell does: `set` stores a value, `get`
 * answers it, `hang` answers only when cancelled. Counts the sessions it saw open and close, the `hang`
 * calls it is serving, and the cancellations it was sent.
 */
function statefulUpstream(sessionScope: UpstreamConfig['sessionScope'], options: Pick<UpstreamConfig, 'pool' | 'timeouts'>) {
  const sessions = { opened: 0, closed: 0, hanging: 0, cancelled: 0 };
  const serve = (): McpServer => {
    const server = new McpServer({ name: 'stateful', version: '1.0.0' });
    let value = '';
    sessions.opened++;
    server.server.onclose = () => void sessions.closed++;
    const handlers = server.server['_notificationHandlers'];
    const cancel = handlers.get('notifications/cancelled');
    handlers.set('notifications/cancelled', async (notification: JSONRPCNotification) => {
      sessions.cancelled++;
      await cancel?.(notification);
    });
    server.registerTool('set', { inputSchema: { value: z.string() } }, (args) => {
      value = args.value;
      return answer(`set ${value}`);
    });
    server.registerTool('get', {}, () => answer(`holds "${value}"`));
    server.registerTool('hang', {}, (extra) => {
      sessions.hanging++;
      return new Promise((resolve) => extra.signal.addEventListener('abort', () => resolve(answer('cancelled')), { once: true }));
    });
    return server;
  };
  return { sessions, config: createInMemoryUpstream(serve, { ...options, ...(sessionScope === undefined ? {} : { sessionScope }) }) };
}

// The upstream is the 1.x SDK's server (the test reaches into its cancel handler); the pool answers in the v2 SDK's types.
const answer = (text: string): UpstreamResult => ({ content: [{ type: 'text', text }] });
const textOf = (result: CallToolResult): string => (result.content[0]?.type === 'text' ? result.content[0].text : '');

describe('sessionScope', () => {
  it('shared (the default): two scopes on a one-session upstream see each other’s state — the leak `task` is for', async () => {
    const upstream = statefulUpstream(undefined, { pool: { max: 1 } });
    await using pool = await createSessionPool({ upstreams: { state: upstream.config } });
    await using alice = pool.openScope('alice');
    await using bob = pool.openScope('bob');
    await alice.callTool('state', 'set', { value: 'alice' });
    await bob.callTool('state', 'set', { value: 'bob' });
    expect(textOf(await alice.callTool('state', 'get'))).toBe('holds "bob"');
  });

  it('task: each scope has a session of its own for all its calls, run in order, and the upstream sees it close with the scope', async () => {
    const upstream = statefulUpstream('task', { pool: { max: 2 } });
    await using pool = await createSessionPool({ upstreams: { state: upstream.config } });
    const alice = pool.openScope('alice');
    await using bob = pool.openScope('bob');
    // Calls of one scope made at once run one after the other, in order: the set is seen by the get.
    await Promise.all([alice.callTool('state', 'set', { value: 'alice' }), bob.callTool('state', 'set', { value: 'bob' })]);
    const [aliceHolds, bobHolds] = await Promise.all([alice.callTool('state', 'get'), bob.callTool('state', 'get')]);
    expect([textOf(aliceHolds), textOf(bobHolds)]).toEqual(['holds "alice"', 'holds "bob"']);
    expect(upstream.sessions).toMatchObject({ opened: 2, closed: 0 });
    expect(pool.status().state?.sessions).toMatchObject({ live: 2, borrowed: 2 });

    await alice.close();
    expect(upstream.sessions.closed).toBe(1);
    expect(textOf(await bob.callTool('state', 'get'))).toBe('holds "bob"');
    await expect(alice.callTool('state', 'get')).rejects.toMatchObject({
      code: 'POOL_CLOSED',
      message: 'The session scope "alice" is closed; no call to state/get',
    });
  });

  it('task: scopes hold at most `pool.max` sessions; one more waits for a session, up to `acquireMs`, and gets a fresh one', async () => {
    const upstream = statefulUpstream('task', { pool: { max: 1 }, timeouts: { acquireMs: 300 } });
    await using pool = await createSessionPool({ upstreams: { state: upstream.config } });
    const alice = pool.openScope('alice');
    await using bob = pool.openScope('bob');
    await using carol = pool.openScope('carol');
    await alice.callTool('state', 'set', { value: 'alice' });

    const bobHolds = bob.callTool('state', 'get');
    await vi.waitFor(() => expect(pool.status().state?.sessions).toMatchObject({ live: 1, waiting: 1 }));
    await alice.close();
    expect(textOf(await bobHolds)).toBe('holds ""');

    await expect(carol.callTool('state', 'get')).rejects.toMatchObject({
      code: 'UPSTREAM_UNAVAILABLE',
      message: expect.stringContaining('no session came free within 300 ms (1 of 1 busy; timeouts.acquireMs)'),
    });
    expect(pool.status().state?.sessions.live).toBe(1);
  });

  it('task: a call that costs the scope its session says the state is lost, and the next call runs on a fresh session', async () => {
    const upstream = statefulUpstream('task', { pool: { max: 1 } });
    await using pool = await createSessionPool({ upstreams: { state: upstream.config } });
    await using alice = pool.openScope('alice');
    await alice.callTool('state', 'set', { value: 'alice' });
    await expect(alice.callTool('state', 'hang', {}, { timeoutMs: 50 })).rejects.toMatchObject({
      code: 'UPSTREAM_TIMEOUT',
      message: expect.stringContaining(
        'The scope "alice" lost its session to upstream "state", and with it whatever state the upstream kept for it; the next call opens a fresh session',
      ),
    });
    expect(textOf(await alice.callTool('state', 'get'))).toBe('holds ""');
    expect(textOf(await alice.callTool('state', 'get'))).toBe('holds ""');
  });

  it('task: a call outside any scope runs on a session of its own, closed after it', async () => {
    const upstream = statefulUpstream('task', { pool: { max: 1 } });
    await using pool = await createSessionPool({ upstreams: { state: upstream.config } });
    await pool.callTool('state', 'set', { value: 'anyone' });
    expect(textOf(await pool.callTool('state', 'get'))).toBe('holds ""');
    expect(upstream.sessions.closed).toBeGreaterThanOrEqual(2);
  });

  it('task: closing a scope cancels its call in flight and closes its session', async () => {
    const upstream = statefulUpstream('task', { pool: { max: 1 } });
    await using pool = await createSessionPool({ upstreams: { state: upstream.config } });
    const alice = pool.openScope('alice');
    const hanging = alice.callTool('state', 'hang');
    await vi.waitFor(() => expect(upstream.sessions.hanging).toBe(1));
    await alice.close();
    await expect(hanging).rejects.toMatchObject({ code: 'ABORTED' });
    expect(upstream.sessions).toMatchObject({ closed: 1, cancelled: 1 });
  });

  it('closing a scope sends no cancellation for calls that already ended, on `task` and `shared` upstreams alike', async () => {
    const own = statefulUpstream('task', { pool: { max: 1 } });
    const common = statefulUpstream('shared', { pool: { max: 1 } });
    await using pool = await createSessionPool({ upstreams: { own: own.config, common: common.config } });
    const alice = pool.openScope('alice');
    await alice.callTool('own', 'set', { value: 'alice' }, { signal: new AbortController().signal });
    await alice.callTool('common', 'get');
    await alice.close();
    expect(own.sessions).toMatchObject({ closed: 1, cancelled: 0 });
    expect(common.sessions).toMatchObject({ closed: 0, cancelled: 0 });
  });

  it('task: the pool’s close() closes the sessions scopes hold — an idle one at once, a busy one at the drain deadline', async () => {
    const upstream = statefulUpstream('task', { pool: { max: 2 } });
    const pool = await createSessionPool({ upstreams: { state: upstream.config } });
    const alice = pool.openScope('alice');
    const bob = pool.openScope('bob');
    await alice.callTool('state', 'set', { value: 'alice' });
    const hanging = bob.callTool('state', 'hang');
    await vi.waitFor(() => expect(upstream.sessions.hanging).toBe(1));
    await pool.close({ drainTimeoutMs: 50 });
    await expect(hanging).rejects.toMatchObject({ code: 'POOL_CLOSED' });
    expect(upstream.sessions).toMatchObject({ opened: 2, closed: 2 });
    await expect(alice.callTool('state', 'get')).rejects.toMatchObject({ code: 'POOL_CLOSED' });
    await Promise.all([alice.close(), bob.close()]);
  });
});
