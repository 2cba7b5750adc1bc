import { once } from 'node:events';
import { createServer, type Server } from 'node:net';
import path from 'node:path';
import { createSessionPool, isKlymError, type SessionPool, type UpstreamLogEntry } from '@klym/core';
import { createInMemoryUpstream } from '@klym/core/testing';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { PingRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { startServerEverything, type RunningServer } from './support/upstream-servers.ts';

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).toReversed()) await cleanup();
});

function textOf(result: { content?: unknown }): string {
  return (result.content as { text?: string }[]).map((item) => item.text ?? '').join('');
}

async function pooled(options: Parameters<typeof createSessionPool>[0]): Promise<SessionPool> {
  const pool = await createSessionPool(options);
  cleanups.push(() => pool.close({ drainTimeoutMs: 100 }));
  return pool;
}

describe('an upstream killed mid-call, then restarted (server-everything)', () => {
  for (const [transport, kind] of [
    ['sse', 'sse'],
    ['streamableHttp', 'streamable-http'],
  ] as const) {
    it(`over ${kind}: the call in flight fails fast naming the upstream; later calls succeed on fresh sessions`, async () => {
      let server: RunningServer = await startServerEverything(transport);
      cleanups.push(() => server.stop());
      const pool = await pooled({ upstreams: { everything: { url: server.url, transport: kind, breaker: { cooldownMs: 100, maxCooldownMs: 200 } } } });

      const call = pool.callTool('everything', 'trigger-long-running-operation', { duration: 30, steps: 30 }).catch((error: unknown) => error);
      await vi.waitFor(() => expect(pool.status().everything?.sessions.borrowed).toBe(1));
      const killedAt = performance.now();
      await server.stop({ hard: true });
      const error = await call;
      const failedAfterMs = performance.now() - killedAt;

      expect(isKlymError(error, 'UPSTREAM_UNAVAILABLE')).toBe(true);
      expect(error).toMatchObject({ upstream: 'everything', message: expect.stringContaining('Upstream "everything" was lost during trigger-long-running-operation') });
      // Not the 60 s request default: the broken session fails its calls at once.
      expect(failedAfterMs).toBeLessThan(5_000);

      server = await startServerEverything(transport, server.port);
      await vi.waitFor(async () => expect(textOf(await pool.callTool('everything', 'echo', { message: 'back' }))).toContain('back'), { timeout: 10_000, interval: 50 });
      expect(textOf(await pool.callTool('everything', 'echo', { message: 'again' }))).toContain('again');
      expect(pool.status().everything?.sessions.opened).toBeGreaterThanOrEqual(2);
      expect(pool.status().everything?.state).toBe('ready');
    });
  }

  it('over streamable-http: an idle session the restarted server no longer knows is replaced, and the call is retried once', async () => {
    let server = await startServerEverything('streamableHttp');
    cleanups.push(() => server.stop());
    const pool = await pooled({ upstreams: { everything: { url: server.url, transport: 'streamable-http', pool: { min: 1, max: 1 } } } });
    expect(textOf(await pool.callTool('everything', 'echo', { message: 'one' }))).toContain('one');
    await server.stop({ hard: true });
    server = await startServerEverything('streamableHttp', server.port);
    // The old session may already be known broken (its GET stream dropped) or only learn it from a 400: either way the caller sees success.
    expect(textOf(await pool.callTool('everything', 'echo', { message: 'two' }))).toContain('two');
    expect(pool.status().everything).toMatchObject({ calls: { failed: 0 }, sessions: { opened: 2 } });
  });
});

describe('an upstream that is down for good', () => {
  it('bounded connect attempts, a clear error well within the acquire timeout, no spinning, and a breaker that opens and probes', async () => {
    let attempts = 0;
    const dead: Server = createServer((socket) => {
      attempts++;
      socket.destroy();
    });
    dead.listen(0, '127.0.0.1');
    await once(dead, 'listening');
    cleanups.push(() => new Promise((resolve) => dead.close(resolve)));
    const { port } = dead.address() as { port: number };

    const pool = await pooled({
      upstreams: {
        dead: {
          url: `http://127.0.0.1:${port}/sse`,
          transport: 'sse',
          timeouts: { connectMs: 1_000, acquireMs: 2_000 },
          breaker: { failureThreshold: 3, cooldownMs: 100, maxCooldownMs: 200 },
        },
      },
    });
    expect(pool.status().dead).toMatchObject({ state: 'down', lastError: { code: 'UPSTREAM_UNAVAILABLE' } });

    const loopBefore = performance.eventLoopUtilization();
    const startedAt = performance.now();
    const errors = await Promise.all(Array.from({ length: 50 }, () => pool.callTool('dead', 'anything').catch((error: unknown) => error)));
    const burstMs = performance.now() - startedAt;
    for (const error of errors) {
      expect(error).toMatchObject({ name: 'KlymError', code: 'UPSTREAM_UNAVAILABLE', upstream: 'dead', message: expect.stringContaining('Upstream "dead" is unavailable') });
    }
    expect(burstMs).toBeLessThan(2_000);
    const afterBurst = attempts;

    // Watch the dead upstream: the breaker keeps probing by itself, one probe per cooldown (100 ms doubling to 200 ms), never a storm.
    const watchedFrom = performance.now();
    await vi.waitFor(() => expect(attempts - afterBurst).toBeGreaterThanOrEqual(3), { timeout: 5_000, interval: 20 });
    const watchedMs = performance.now() - watchedFrom;
    const loop = performance.eventLoopUtilization(loopBefore);
    expect(afterBurst).toBeLessThanOrEqual(12);
    expect(attempts - afterBurst).toBeLessThanOrEqual(Math.ceil(watchedMs / 100) + 1);
    expect(loop.utilization).toBeLessThan(0.5);
    const { breaker, sessions } = pool.status().dead!;
    expect(breaker.opens).toBeGreaterThanOrEqual(2);
    expect(sessions.connectAttempts).toBe(attempts);
  });
});

describe('a stdio upstream', () => {
  const fixture = path.join(import.meta.dirname, 'support/stdio-fixture-server.ts');

  it('that crashes is replaced by a new child', async () => {
    const pool = await pooled({ upstreams: { fixture: { command: process.execPath, args: [fixture], breaker: { cooldownMs: 50 } } } });
    const firstPid = textOf(await pool.callTool('fixture', 'pid'));
    await expect(pool.callTool('fixture', 'crash')).rejects.toMatchObject({ code: 'UPSTREAM_UNAVAILABLE', upstream: 'fixture' });
    const secondPid = textOf(await pool.callTool('fixture', 'pid'));
    expect(secondPid).toMatch(/^\d+$/);
    expect(secondPid).not.toBe(firstPid);
  });

  it('that floods stderr costs bounded memory: lines are cut at 8 KiB and handed on as they come', async () => {
    let entries = 0;
    let longest = 0;
    const pool = await pooled({
      upstreams: { fixture: { command: process.execPath, args: [fixture] } },
      onLog: (entry) => {
        entries++;
        longest = Math.max(longest, entry.message.length);
      },
    });
    await pool.callTool('fixture', 'flood_stderr', { megabytes: 64, newlines: false });
    await vi.waitFor(() => expect(entries).toBeGreaterThanOrEqual(2));
    expect(longest).toBeLessThanOrEqual(8_193);
    const before = entries;
    await pool.callTool('fixture', 'flood_stderr', { megabytes: 16, newlines: true });
    await vi.waitFor(() => expect(entries - before).toBeGreaterThanOrEqual(16 * 1024));
    expect(longest).toBeLessThanOrEqual(8_193);
  });

  it('hands its log messages and stderr lines to the borrower of the session, tagged with the upstream', async () => {
    const all: UpstreamLogEntry[] = [];
    const mine: UpstreamLogEntry[] = [];
    const pool = await pooled({ upstreams: { fixture: { command: process.execPath, args: [fixture] } }, onLog: (entry) => all.push(entry) });
    await pool.callTool('fixture', 'log', { message: 'disk almost full' }, { onLog: (entry) => mine.push(entry) });
    await vi.waitFor(() => expect(mine).toHaveLength(2));
    expect(mine).toEqual(
      expect.arrayContaining([
        { upstream: 'fixture', source: 'notification', level: 'warning', logger: 'fixture', message: 'disk almost full' },
        { upstream: 'fixture', source: 'stderr', level: 'info', message: 'stderr says disk almost full' },
      ]),
    );
    expect(all).toEqual(expect.arrayContaining(mine));
  });
});

describe('a health probe that hangs or throws', () => {
  for (const behaviour of ['hangs', 'throws'] as const) {
    it(`(${behaviour}): no unhandled rejection, and the pool lends a fresh session instead`, async () => {
      let servers = 0;
      const unhealthy = (): McpServer => {
        servers++;
        const server = new McpServer({ name: 'unhealthy', version: '1.0.0' });
        server.registerTool('ok', {}, () => ({ content: [{ type: 'text', text: 'ok' }] }));
        server.server.setRequestHandler(PingRequestSchema, () => (behaviour === 'hangs' ? new Promise<never>(() => {}) : Promise.reject(new Error('ping broke'))));
        return server;
      };
      const pool = await pooled({ upstreams: { unhealthy: createInMemoryUpstream(unhealthy, { pool: { min: 1, max: 1 }, timeouts: { idlePingMs: 0, connectMs: 200 } }) } });
      expect(textOf(await pool.callTool('unhealthy', 'ok'))).toBe('ok');
      expect(textOf(await pool.callTool('unhealthy', 'ok'))).toBe('ok');
      expect(servers).toBeGreaterThanOrEqual(3);
      expect(pool.status().unhealthy?.calls).toMatchObject({ succeeded: 2, failed: 0 });
    });
  }
});
