// The pool as a client of both protocol eras: a 2026-07-28 upstream (the v2 SDK's `createMcpHandler`)
// spoken to statelessly, and a 2025-11-25 one (the fake grynya-mcp-server, on the 1.x SDK) through the
// same configuration; and the pool's failure handling against the stateless one.
import path from 'node:path';
import { isKlymError, type UpstreamLogEntry } from '@klym/core';
import { createFakeGrynya } from '@klym/fake-grynya';
import { describe, expect, it, vi } from 'vitest';
import { startMcp20260728Upstream, type Mcp20260728Upstream } from './support/mcp-2026-07-28-upstream.ts';
import { useCleanups } from './support/pool-cleanups.ts';

const cleanups = useCleanups();
const pooled = cleanups.pooled;

async function mcp20260728Upstream(port?: number): Promise<Mcp20260728Upstream> {
  const upstream = await startMcp20260728Upstream(port === undefined ? {} : { port });
  cleanups.add(() => upstream.close());
  return upstream;
}

function textOf(result: { content?: unknown }): string {
  return (result.content as { text?: string }[]).map((item) => item.text ?? '').join('');
}

describe('one configuration, both eras', () => {
  it('a 2026-07-28 upstream is spoken to statelessly: server/discover, no initialize, no session id; its tools listed and called', async () => {
    const upstream = await mcp20260728Upstream();
    const pool = await pooled({ upstreams: { mcp20260728: { url: upstream.url } } });

    const { tools, upstreams } = await pool.listTools();
    expect(upstreams['mcp20260728']).toEqual({ ok: true, toolCount: 3 });
    expect(tools.map((tool) => tool.name).toSorted()).toEqual(['mcp20260728__echo', 'mcp20260728__log', 'mcp20260728__wait']);
    expect(textOf(await pool.callTool('mcp20260728', 'echo', { message: 'hi' }))).toBe('echo: hi');
    expect(pool.status().mcp20260728).toMatchObject({ state: 'ready', transport: 'streamable-http', protocolVersion: '2026-07-28' });

    const methods = upstream.requests.map((request) => request.method);
    expect(methods[0]).toBe('server/discover');
    expect(methods).not.toContain('initialize');
    expect(methods).toContain('tools/call');
    expect(upstream.requests.some((request) => request.headers['mcp-session-id'] !== undefined)).toBe(false);
    // Each request carries its revision (the era's headers, besides the `_meta` envelope).
    const call = upstream.requests.find((request) => request.method === 'tools/call');
    expect(call?.headers).toMatchObject({ 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'tools/call', 'mcp-name': 'echo' });
  });

  it('a 2025-11-25 upstream (the fake grynya) through the same configuration: initialize after the probe, sessions as before', async () => {
    const grynya = await createFakeGrynya();
    cleanups.add(() => grynya.close());
    const pool = await pooled({ upstreams: { grynya: { url: grynya.mcpUrl } } });

    const result = await pool.callTool('grynya', 'query_graph', { query: 'RETURN 1' });
    expect(textOf(result)).toContain('"status"');
    expect(pool.status().grynya).toMatchObject({ state: 'ready', transport: 'streamable-http', protocolVersion: '2025-11-25' });
    expect(grynya.stats.initialize).toBe(1);
  });

  it('legacy SSE (the fake grynya at /sse, `auto` falling back to it) speaks 2025-11-25', async () => {
    const grynya = await createFakeGrynya();
    cleanups.add(() => grynya.close());
    const pool = await pooled({ upstreams: { grynya: { url: grynya.sseUrl } } });

    expect(textOf(await pool.callTool('grynya', 'query_graph', { query: 'RETURN 1' }))).toContain('"status"');
    expect(pool.status().grynya).toMatchObject({ state: 'ready', transport: 'sse', protocolVersion: '2025-11-25' });
  });

  it('`protocol: 2025-11-25` never probes a 2026 upstream, which serves it per request; `2026-07-28` refuses a 2025-only one', async () => {
    const upstream = await mcp20260728Upstream();
    const pool = await pooled({ upstreams: { mcp20260728: { url: upstream.url, protocol: '2025-11-25' } } });
    expect(textOf(await pool.callTool('mcp20260728', 'echo', { message: 'old' }))).toBe('echo: old');
    expect(pool.status().mcp20260728?.protocolVersion).toBe('2025-11-25');
    expect(upstream.requests.map((request) => request.method)).not.toContain('server/discover');

    const grynya = await createFakeGrynya();
    cleanups.add(() => grynya.close());
    const pinned = await pooled({ upstreams: { grynya: { url: grynya.mcpUrl, protocol: '2026-07-28', pool: { min: 0 } } } });
    const error = await pinned.callTool('grynya', 'query_graph', { query: 'RETURN 1' }).catch((caught: unknown) => caught);
    expect(error).toMatchObject({
      code: 'UPSTREAM_UNAVAILABLE',
      upstream: 'grynya',
      message: expect.stringMatching(/Upstream "grynya" is unavailable: .*2026-07-28/),
    });
  });

  it('over stdio: 2025-11-25 unless asked; with `protocol: auto` a 2026 server (serveStdio) is probed on a sibling process and spoken to in 2026-07-28', async () => {
    const command = {
      command: process.execPath,
      args: ['--conditions=klym-source', path.join(import.meta.dirname, 'support', 'mcp-2026-07-28-stdio-child.ts')],
    };
    const pool = await pooled({ upstreams: { plain: command, probed: { ...command, protocol: 'auto' } } });
    expect(textOf(await pool.callTool('plain', 'echo', { message: 'a' }))).toBe('a (2025-11-25)');
    expect(textOf(await pool.callTool('probed', 'echo', { message: 'b' }))).toBe('b (2026-07-28)');
    expect(pool.status()).toMatchObject({
      plain: { transport: 'stdio', protocolVersion: '2025-11-25' },
      probed: { transport: 'stdio', protocolVersion: '2026-07-28' },
    });
  });

  it('later sessions reuse the first one’s verdict: one server/discover per upstream, however many sessions open', async () => {
    const upstream = await mcp20260728Upstream();
    const pool = await pooled({ upstreams: { mcp20260728: { url: upstream.url, pool: { min: 3, max: 3 } } } });
    await pool.listTools();
    expect(pool.status().mcp20260728?.sessions.opened).toBe(3);
    // The first connect probes; the other two, started with it, may have probed too before a verdict was known.
    const probes = upstream.requests.filter((request) => request.method === 'server/discover').length;
    expect(probes).toBeLessThanOrEqual(3);
    const calls = Array.from({ length: 6 }, (_, index) => pool.callTool('mcp20260728', 'echo', { message: String(index) }));
    expect((await Promise.all(calls)).map(textOf)).toEqual(['echo: 0', 'echo: 1', 'echo: 2', 'echo: 3', 'echo: 4', 'echo: 5']);
    expect(upstream.requests.filter((request) => request.method === 'server/discover').length).toBe(probes);
  });

  it('a 2026 upstream’s log messages reach the caller of the call they belong to', async () => {
    const upstream = await mcp20260728Upstream();
    const pool = await pooled({ upstreams: { mcp20260728: { url: upstream.url } } });
    const logged: UpstreamLogEntry[] = [];
    expect(textOf(await pool.callTool('mcp20260728', 'log', { message: 'half way' }, { onLog: (entry) => logged.push(entry) }))).toBe('logged');
    expect(logged).toContainEqual(expect.objectContaining({ upstream: 'mcp20260728', source: 'notification', level: 'info', message: 'half way' }));
  });
});

describe('failure handling against a stateless (2026-07-28) upstream', () => {
  it('killed mid-call: the call in flight fails naming the upstream; restarted on its port, calls succeed again on fresh sessions', async () => {
    let upstream = await mcp20260728Upstream();
    const pool = await pooled({ upstreams: { mcp20260728: { url: upstream.url, breaker: { cooldownMs: 100, maxCooldownMs: 200 } } } });
    await pool.listTools();

    const call = pool.callTool('mcp20260728', 'wait', {}).catch((error: unknown) => error);
    await vi.waitFor(() => expect(upstream.waiting).toBe(1));
    await upstream.die();
    const error = await call;
    expect(isKlymError(error, 'UPSTREAM_UNAVAILABLE')).toBe(true);
    expect(error).toMatchObject({ upstream: 'mcp20260728', message: expect.stringContaining('Upstream "mcp20260728" was lost during wait') });

    const { port } = upstream;
    await upstream.close();
    upstream = await mcp20260728Upstream(port);
    await vi.waitFor(async () => expect(textOf(await pool.callTool('mcp20260728', 'echo', { message: 'back' }))).toBe('echo: back'), {
      timeout: 10_000,
      interval: 50,
    });
    expect(pool.status().mcp20260728).toMatchObject({ state: 'ready', protocolVersion: '2026-07-28' });
    expect(pool.status().mcp20260728?.sessions.opened).toBeGreaterThanOrEqual(2);
  });

  it('restarted while idle: the dropped `subscriptions/listen` stream retires the session, a fresh one opens, and calls go on', async () => {
    let upstream = await mcp20260728Upstream();
    const pool = await pooled({
      upstreams: { mcp20260728: { url: upstream.url, pool: { min: 1, max: 1 }, breaker: { cooldownMs: 100, maxCooldownMs: 200 } } },
    });
    expect(textOf(await pool.callTool('mcp20260728', 'echo', { message: 'one' }))).toBe('echo: one');
    const { port } = upstream;
    await upstream.close();
    upstream = await mcp20260728Upstream(port);
    // Nothing else tells an idle stateless session that its upstream went away: without the stream, a changed
    // tool list would never be heard of again.
    await vi.waitFor(() => expect(pool.status().mcp20260728?.sessions).toMatchObject({ opened: 2, live: 1 }), { timeout: 5_000 });
    expect(upstream.requests.map((request) => request.method)).toEqual(expect.arrayContaining(['subscriptions/listen']));
    expect(textOf(await pool.callTool('mcp20260728', 'echo', { message: 'two' }))).toBe('echo: two');
    expect(pool.status().mcp20260728).toMatchObject({ state: 'ready', protocolVersion: '2026-07-28', calls: { failed: 0 } });
  });

  it('an upstream that comes back speaking 2025-11-25 only is probed again, not held to its old verdict', async () => {
    const upstream = await mcp20260728Upstream();
    const pool = await pooled({ upstreams: { moving: { url: upstream.url, pool: { min: 1, max: 1 }, breaker: { cooldownMs: 100, maxCooldownMs: 200 } } } });
    expect(textOf(await pool.callTool('moving', 'echo', { message: 'new' }))).toBe('echo: new');
    expect(pool.status().moving?.protocolVersion).toBe('2026-07-28');
    await upstream.close();
    const grynya = await createFakeGrynya({ port: upstream.port });
    cleanups.add(() => grynya.close());
    await vi.waitFor(async () => expect(textOf(await pool.callTool('moving', 'query_graph', { query: 'RETURN 1' }))).toContain('"status"'), {
      timeout: 10_000,
      interval: 50,
    });
    expect(pool.status().moving).toMatchObject({ state: 'ready', protocolVersion: '2025-11-25' });
  });

  it('an aborted call ends at once, and its request is cut on the upstream', async () => {
    const upstream = await mcp20260728Upstream();
    const pool = await pooled({ upstreams: { mcp20260728: { url: upstream.url } } });
    const controller = new AbortController();
    const call = pool.callTool('mcp20260728', 'wait', {}, { signal: controller.signal }).catch((error: unknown) => error);
    await vi.waitFor(() => expect(upstream.waiting).toBe(1));
    controller.abort(new Error('enough'));
    expect(await call).toMatchObject({ code: 'ABORTED', upstream: 'mcp20260728' });
    // 2026-07-28 cancels a request by closing its stream, which the server's handler sees as its signal.
    await vi.waitFor(() => expect(upstream.waiting).toBe(0));
    expect(textOf(await pool.callTool('mcp20260728', 'echo', { message: 'after' }))).toBe('echo: after');
  });

  it('`sessionScope: task` against it: each scope holds a connection of its own, and both work', async () => {
    const upstream = await mcp20260728Upstream();
    const pool = await pooled({ upstreams: { mcp20260728: { url: upstream.url, sessionScope: 'task', pool: { min: 0, max: 2 } } } });
    await using first = pool.openScope('task-1');
    await using second = pool.openScope('task-2');
    expect(textOf(await first.callTool('mcp20260728', 'echo', { message: 'a' }))).toBe('echo: a');
    expect(textOf(await second.callTool('mcp20260728', 'echo', { message: 'b' }))).toBe('echo: b');
    expect(pool.status().mcp20260728?.sessions).toMatchObject({ borrowed: 2 });
    expect(upstream.requests.some((request) => request.headers['mcp-session-id'] !== undefined)).toBe(false);
  });
});
