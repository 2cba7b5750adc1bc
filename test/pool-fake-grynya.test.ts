import { spawn } from 'node:child_process';
import { once } from 'node:events';
import path from 'node:path';
import { createSessionPool, type SessionPool, type UpstreamConfig } from '@klym/core';
import { createFakeGrynya, type FakeGrynya } from '@klym/fake-grynya';
import { afterEach, describe, expect, it, vi } from 'vitest';

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).toReversed()) await cleanup();
});

async function fake(options: Parameters<typeof createFakeGrynya>[0] = {}): Promise<FakeGrynya> {
  const grynya = await createFakeGrynya(options);
  cleanups.push(() => grynya.close());
  return grynya;
}

async function pooled(upstream: UpstreamConfig): Promise<SessionPool> {
  const pool = await createSessionPool({ upstreams: { grynya: upstream } });
  cleanups.push(() => pool.close({ drainTimeoutMs: 100 }));
  await pool.warmedUp();
  return pool;
}

/** grynya answers one text item holding JSON; parse it. */
function json(result: { content?: unknown }): { status: string; results?: unknown[]; message?: string } {
  const [item] = result.content as { type: string; text: string }[];
  return JSON.parse(item?.text ?? 'null') as { status: string; results?: unknown[]; message?: string };
}

const transports = [
  ['sse', (grynya: FakeGrynya) => grynya.sseUrl],
  ['streamable-http', (grynya: FakeGrynya) => grynya.mcpUrl],
] as const;

describe('the pool against the fake grynya-mcp-server', () => {
  for (const [transport, urlOf] of transports) {
    describe(`over ${transport}`, () => {
      it('passes the Host allow-list only with the Host override, as inside Docker', async () => {
        const grynya = await fake({ allowedHosts: ['localhost'] });
        const refused = await pooled({ url: urlOf(grynya), transport, pool: { min: 0 } });
        await expect(refused.callTool('grynya', 'query_graph', { query: 'RETURN 1' })).rejects.toMatchObject({
          code: 'UPSTREAM_UNAVAILABLE',
          upstream: 'grynya',
          message: expect.stringMatching(/421/),
        });
        expect(grynya.stats.rejectedHost).toBeGreaterThan(0);

        const pool = await pooled({ url: urlOf(grynya), transport, headers: { Host: 'localhost' } });
        expect(json(await pool.callTool('grynya', 'query_graph', { query: 'RETURN 1' }))).toMatchObject({ status: 'success', results: [{ '1': 1 }] });
      });

      it('lists the five tools under namespaced names with their original names and schemas', async () => {
        const grynya = await fake();
        const pool = await pooled({ url: urlOf(grynya), transport });
        const { tools, upstreams } = await pool.listTools();
        expect(upstreams.grynya).toEqual({ ok: true, toolCount: 5 });
        expect(tools.map((tool) => tool.name).toSorted()).toEqual([
          'grynya__add_node',
          'grynya__create_session',
          'grynya__link_nodes',
          'grynya__query_graph',
          'grynya__update_last_event',
        ]);
        const query = tools.find((tool) => tool.originalName === 'query_graph');
        expect(query?.inputSchema).toMatchObject({ type: 'object', required: ['query'] });
      });

      it('answers many concurrent callers on a small pool, never opening more than max sessions', async () => {
        const grynya = await fake();
        grynya.faults.delayMs = 5;
        const pool = await pooled({ url: urlOf(grynya), transport, pool: { min: 1, max: 3 } });
        const results = await Promise.all(Array.from({ length: 60 }, (_, index) => pool.callTool('grynya', 'query_graph', { query: `RETURN ${index}` })));
        expect(results.map((result) => json(result).results)).toEqual(Array.from({ length: 60 }, (_, index) => [{ [String(index)]: index }]));
        expect(grynya.stats.initialize).toBeLessThanOrEqual(3);
        expect(pool.status().grynya).toMatchObject({ sessions: { opened: grynya.stats.initialize, borrowed: 0 }, calls: { succeeded: 60 } });
        expect(pool.status().grynya?.sessions.live).toBeLessThanOrEqual(3);
      });

      it('kill mid-call and restart: the call fails fast naming grynya; the next calls run on fresh, initialized sessions', async () => {
        const grynya = await fake();
        const pool = await pooled({ url: urlOf(grynya), transport, breaker: { cooldownMs: 50, maxCooldownMs: 100 } });
        expect(grynya.stats.initialize).toBe(1);
        grynya.faults.hang = true;
        const call = pool.callTool('grynya', 'query_graph', { query: 'RETURN 1' }).catch((error: unknown) => error);
        await vi.waitFor(() => expect(grynya.stats.toolCalls).toBe(1));
        await grynya.die();
        await expect(call).resolves.toMatchObject({ name: 'KlymError', code: 'UPSTREAM_UNAVAILABLE', upstream: 'grynya' });

        grynya.faults.hang = false;
        await grynya.restart();
        await vi.waitFor(async () => expect(json(await pool.callTool('grynya', 'query_graph', { query: 'RETURN 2' })).status).toBe('success'), {
          timeout: 10_000,
          interval: 50,
        });
        expect(json(await pool.callTool('grynya', 'query_graph', { query: 'RETURN 3' })).status).toBe('success');
        // Every session the pool opened ran initialize on the fake: the first, and the fresh ones after the restart.
        expect(grynya.stats.initialize).toBe(pool.status().grynya?.sessions.opened);
        expect(grynya.stats.initialize).toBeGreaterThanOrEqual(2);
        expect(grynya.stats.refusedBeforeInitialize).toBe(0);
      });

      it('a hanging call times out, the upstream receives the cancellation, and the session is replaced', async () => {
        const grynya = await fake();
        const pool = await pooled({ url: urlOf(grynya), transport, pool: { min: 1, max: 1 } });
        grynya.faults.hang = true;
        await expect(pool.callTool('grynya', 'query_graph', { query: 'RETURN 1' }, { timeoutMs: 150 })).rejects.toMatchObject({
          code: 'UPSTREAM_TIMEOUT',
          upstream: 'grynya',
          toolName: 'query_graph',
        });
        await vi.waitFor(() => expect(grynya.stats.cancelled).toBe(1));
        grynya.faults.hang = false;
        expect(json(await pool.callTool('grynya', 'query_graph', { query: 'RETURN 1' })).status).toBe('success');
        expect(grynya.stats.initialize).toBe(2);
      });

      it('an abort from the caller does the same: ABORTED, cancellation delivered, session replaced', async () => {
        const grynya = await fake();
        const pool = await pooled({ url: urlOf(grynya), transport, pool: { min: 1, max: 1 } });
        grynya.faults.hang = true;
        const controller = new AbortController();
        const call = pool.callTool('grynya', 'query_graph', { query: 'RETURN 1' }, { signal: controller.signal });
        await vi.waitFor(() => expect(grynya.stats.toolCalls).toBe(1));
        controller.abort(new Error('the person changed their mind'));
        await expect(call).rejects.toMatchObject({ code: 'ABORTED', upstream: 'grynya' });
        await vi.waitFor(() => expect(grynya.stats.cancelled).toBe(1));
        grynya.faults.hang = false;
        expect(json(await pool.callTool('grynya', 'query_graph', { query: 'RETURN 1' })).status).toBe('success');
        expect(grynya.stats.initialize).toBe(2);
      });

      it('passes "database disconnected" through unchanged: a protocol success whose JSON status says error', async () => {
        const grynya = await fake();
        const pool = await pooled({ url: urlOf(grynya), transport });
        grynya.faults.dbDisconnected = true;
        const result = await pool.callTool('grynya', 'query_graph', { query: 'RETURN 1' });
        expect(result.isError).toBeFalsy();
        expect(json(result)).toEqual({ status: 'error', message: 'FalkorDB is not connected' });
        expect(pool.status().grynya?.calls).toMatchObject({ succeeded: 1, failed: 0 });
      });
    });
  }

  it('close() terminates Streamable HTTP sessions with a DELETE, so the server forgets them', async () => {
    const grynya = await fake();
    const pool = await createSessionPool({ upstreams: { grynya: { url: grynya.mcpUrl, transport: 'streamable-http', pool: { min: 2, max: 2 } } } });
    await pool.warmedUp();
    expect(grynya.stats.sessionsOpen).toBe(2);
    await pool.close();
    await vi.waitFor(() => expect(grynya.stats.sessionsOpen).toBe(0));
  });

  it('a child script that opens, uses and closes a pool exits on its own', async () => {
    const grynya = await fake();
    const script = `
      import { createSessionPool } from '@klym/core';
      const pool = await createSessionPool({ upstreams: { grynya: { url: process.argv[1], pool: { min: 2, max: 2 } } } });
      const result = await pool.callTool('grynya', 'query_graph', { query: 'RETURN 7' });
      await pool.close();
      console.log(result.content[0].text);
    `;
    const child = spawn(process.execPath, ['--conditions=klym-source', '--input-type=module', '--eval', script, grynya.sseUrl], {
      cwd: path.resolve(import.meta.dirname, '../apps/server'),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    const [code, signal] = (await once(child, 'exit')) as [number | null, string | null];
    clearTimeout(timer);
    expect({ code, signal, output }).toMatchObject({ code: 0, signal: null, output: expect.stringContaining('"status": "success"') });
  });
});
