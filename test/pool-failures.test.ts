import { fork } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createSessionPool, createTaskService, isKlymError, type SessionPool, type UpstreamLogEntry } from '@klym/core';
import { createInMemoryUpstream } from '@klym/core/testing';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { PingRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createManualClock } from './support/manual-clock.ts';
import { startServerEverything, type RunningServer } from './support/upstream-servers.ts';

const MIB = 1024 * 1024;
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
  await pool.warmedUp();
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
      await server.stop({ hard: true });
      // Within this test's time limit (20 s), far short of the call's own (30 s of work, 60 s for the request):
      // only the broken session can fail it.
      const error = await call;

      expect(isKlymError(error, 'UPSTREAM_UNAVAILABLE')).toBe(true);
      expect(error).toMatchObject({
        upstream: 'everything',
        message: expect.stringContaining('Upstream "everything" was lost during trigger-long-running-operation'),
      });

      server = await startServerEverything(transport, server.port);
      await vi.waitFor(async () => expect(textOf(await pool.callTool('everything', 'echo', { message: 'back' }))).toContain('back'), {
        timeout: 10_000,
        interval: 50,
      });
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

    // The breaker's cooldown and probes run on this clock: they come when the test moves it, and only then.
    const clock = createManualClock();
    const pool = await pooled({
      upstreams: {
        dead: {
          url: `http://127.0.0.1:${port}/sse`,
          transport: 'sse',
          timeouts: { connectMs: 1_000, acquireMs: 2_000 },
          breaker: { failureThreshold: 3, cooldownMs: 100, maxCooldownMs: 200 },
        },
      },
      clock,
    });
    expect(pool.status().dead).toMatchObject({ state: 'down', lastError: { code: 'UPSTREAM_UNAVAILABLE' } });

    const errors = await Promise.all(Array.from({ length: 50 }, () => pool.callTool('dead', 'anything').catch((error: unknown) => error)));
    for (const error of errors) {
      expect(error).toMatchObject({
        name: 'KlymError',
        code: 'UPSTREAM_UNAVAILABLE',
        upstream: 'dead',
        message: expect.stringContaining('Upstream "dead" is unavailable'),
      });
      // Refused by the breaker or by a failed connect, never left to wait out acquireMs.
      expect((error as Error).message).not.toContain('acquireMs');
    }
    expect(attempts).toBeLessThanOrEqual(12);
    expect(pool.status().dead?.breaker).toMatchObject({ state: 'open', opens: 1 });

    // Watch the dead upstream: the breaker probes by itself, one probe per cooldown (100 ms doubling to 200 ms),
    // never a storm: the one timer on the clock is the next probe, and each probe is one connect.
    for (const [round, cooldownMs] of [100, 200, 200].entries()) {
      const before = attempts;
      expect(clock.pending()).toEqual([expect.any(Number)]);
      const dueInMs = clock.pending()[0] as number;
      expect(dueInMs).toBeLessThanOrEqual(cooldownMs);
      clock.advance(dueInMs - 1);
      expect(clock.pending()).toEqual([1]);
      clock.advance(1);
      await vi.waitFor(() => expect(pool.status().dead?.breaker).toMatchObject({ state: 'open', opens: round + 2 }));
      expect(attempts).toBe(before + 1);
      expect(clock.pending()).toEqual([Math.min(2 * cooldownMs, 200)]);
    }
    expect(pool.status().dead?.sessions.connectAttempts).toBe(attempts);
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

  it('has a call its caller aborts fail with ABORTED, and the server is sent the cancellation of that request', async () => {
    const entries: UpstreamLogEntry[] = [];
    const pool = await pooled({ upstreams: { fixture: { command: process.execPath, args: [fixture] } }, onLog: (entry) => entries.push(entry) });
    const firstPid = textOf(await pool.callTool('fixture', 'pid'));
    const controller = new AbortController();
    const call = pool.callTool('fixture', 'hang', {}, { signal: controller.signal });
    await vi.waitFor(() => expect(entries).toContainEqual(expect.objectContaining({ source: 'stderr', message: expect.stringMatching(/^hang \d+ started$/) })));
    controller.abort(new Error('the person changed their mind'));
    await expect(call).rejects.toMatchObject({ code: 'ABORTED', upstream: 'fixture', message: 'The call to fixture/hang was aborted' });
    await vi.waitFor(() => {
      expect(entries).toContainEqual(
        expect.objectContaining({ source: 'stderr', message: expect.stringMatching(/^hang \d+ cancelled: Error: the person changed their mind$/) }),
      );
    });
    // Its state in doubt, the session is replaced by a new child.
    expect(textOf(await pool.callTool('fixture', 'pid'))).not.toBe(firstPid);
  });

  it('that answers initialize and exits at once is backed off by the breaker, not respawned in a storm, and health says why it is down', async () => {
    const spawnLog = path.join(mkdtempSync(path.join(tmpdir(), 'klym-spawns-')), 'spawns.log');
    cleanups.push(async () => rmSync(path.dirname(spawnLog), { recursive: true, force: true }));
    // The default breaker: 3 failures open it for 1 s, doubling up to 10 s.
    const clock = createManualClock();
    const pool = await pooled({
      upstreams: { flaky: { command: process.execPath, args: [fixture, '--exit-after-initialize=100', `--spawn-log=${spawnLog}`] } },
      clock,
    });
    const service = createTaskService({ pool });
    cleanups.push(() => service.close());
    const spawns = (): number => (existsSync(spawnLog) ? readFileSync(spawnLog, 'utf8').split('\n').filter(Boolean).length : 0);

    await vi.waitFor(
      async () => {
        expect(await service.health()).toMatchObject({
          status: 'degraded',
          upstreams: { flaky: { state: 'down', reason: 'closed-after-connect', breaker: 'open' } },
        });
      },
      // Three children spawned, initialized and exited: seconds on a loaded machine.
      { timeout: 15_000, interval: 20 },
    );
    // On the pool's clock, which has not moved, each session lived 0 ms (the child lived 100 ms of Node's time).
    expect(pool.status().flaky?.lastError?.message).toMatch(/^Upstream "flaky" is unavailable: its session closed 0 ms after connecting/);
    expect(pool.status().flaky?.breaker).toMatchObject({ state: 'open', opens: 1 });
    // With the breaker open, a probe after 1 s, the next 2 s later, the next 4 s later: one child each, which dies again.
    for (const [round, cooldownMs] of [1_000, 2_000, 4_000].entries()) {
      const before = spawns();
      expect(clock.pending()).toEqual([cooldownMs]);
      clock.advance(cooldownMs - 1);
      expect(clock.pending()).toEqual([1]);
      clock.advance(1);
      await vi.waitFor(() => expect(pool.status().flaky?.breaker).toMatchObject({ state: 'open', opens: round + 2 }), { timeout: 5_000, interval: 20 });
      expect(spawns()).toBe(before + 1);
    }
    expect(clock.pending()).toEqual([8_000]);
  });

  it('that floods stderr has its lines cut at 8 KiB, at most 256 KiB of them handed on at once, then 64 KiB a second, and the rest dropped and counted', async () => {
    const entries: UpstreamLogEntry[] = [];
    // The rate (64 KiB a second past the first 256 KiB) is measured on the pool's clock: held still, only the burst passes.
    const clock = createManualClock();
    const pool = await pooled({ upstreams: { fixture: { command: process.execPath, args: [fixture] } }, onLog: (entry) => entries.push(entry), clock });
    const readBefore = pool.status().fixture?.stderr?.bytes ?? 0;
    await pool.callTool('fixture', 'flood_stderr', { megabytes: 4, newlines: false });
    await pool.callTool('fixture', 'flood_stderr', { megabytes: 8, newlines: true });
    await vi.waitFor(() => {
      expect(entries).toContainEqual(
        expect.objectContaining({ upstream: 'fixture', source: 'stderr', level: 'warning', message: expect.stringContaining('floods its stderr') }),
      );
    });
    // Each flood ends with "\nflood done\n".
    const written = 12 * MIB + 2 * 12;
    await vi.waitFor(() => expect(pool.status().fixture?.stderr?.bytes).toBe(readBefore + written));

    const lines = entries.filter((entry) => entry.source === 'stderr' && entry.level === 'info').map((entry) => entry.message);
    expect(Math.max(...lines.map((line) => line.length))).toBeLessThanOrEqual(8_193);
    const handedOn = lines.reduce((sum, line) => sum + Buffer.byteLength(line), 0);
    expect(handedOn).toBeLessThanOrEqual(256 * 1024);
    // What was not handed on was dropped and counted (but the newlines that ended lines).
    expect(pool.status().fixture?.stderr?.droppedBytes).toBeGreaterThanOrEqual(written - handedOn - 8 * 1024 - 8);

    // A second later on the pool's clock, another flood has 64 KiB of its lines handed on, and no more.
    clock.advance(1_000);
    const seen = entries.length;
    await pool.callTool('fixture', 'flood_stderr', { megabytes: 1, newlines: true });
    await vi.waitFor(() => expect(pool.status().fixture?.stderr?.bytes).toBe(readBefore + written + MIB + 12));
    const later = entries.slice(seen).filter((entry) => entry.source === 'stderr' && entry.level === 'info');
    const handedOnLater = later.reduce((sum, entry) => sum + Buffer.byteLength(entry.message), 0);
    expect(handedOnLater).toBeGreaterThan(60 * 1024);
    expect(handedOnLater).toBeLessThanOrEqual(64 * 1024);
  });

  it('that floods stderr during a task costs bounded memory: RSS before and after three 50 MiB floods', async ({ annotate }) => {
    interface FloodReport {
      readonly rss: number;
      readonly stderr: { readonly bytes: number; readonly lines: number; readonly droppedBytes: number };
      readonly logEntries: number;
    }
    // The process that reads the stderr is measured alone: a child running Klym's task machinery (see the harness).
    const child = fork(path.join(import.meta.dirname, 'support/stderr-flood-child.ts'), {
      execArgv: ['--conditions=klym-source'],
      stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
    });
    cleanups.push(async () => {
      const exited = once(child, 'exit');
      if (child.connected) child.send('close');
      else child.kill();
      await exited;
    });
    const next = async (): Promise<FloodReport> => ((await once(child, 'message')) as [FloodReport])[0];
    const before = await next();
    const after: FloodReport[] = [];
    for (let flood = 0; flood < 3; flood++) {
      child.send('flood');
      after.push(await next());
    }
    const mib = (bytes: number): number => Math.round(bytes / MIB);
    const shown = `RSS before ${mib(before.rss)} MiB; after each flood ${after.map((report) => `${mib(report.rss)} MiB`).join(', ')}`;
    await annotate(shown, 'memory');

    const last = after.at(-1) as FloodReport;
    expect(last.stderr.bytes - before.stderr.bytes).toBe(3 * 2 * (25 * MIB + 12));
    expect(last.stderr.droppedBytes).toBeGreaterThan(0.99 * (last.stderr.bytes - before.stderr.bytes));
    // A few hundred lines a flood reach the task's log, not 25,600.
    for (const report of after) expect(report.logEntries).toBeLessThan(2_000);
    // Node reads a pipe in 64 KiB buffers that are freed at the next GC, which V8 runs after about 64 MiB of
    // such memory: a plain process draining this stream here grows about 50 MiB. Klym may add its heap's
    // slack to that, but its growth must not follow the flood: 150 MiB read, under 128 MiB grown.
    expect(mib(last.rss - before.rss)).toBeLessThan(128);
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

describe('a pool whose sessions are all busy (server-everything)', () => {
  it('serves the last good tool list at once, though its own new session made the upstream say the list changed', async () => {
    const server = await startServerEverything('sse');
    cleanups.push(() => server.stop());
    const pool = await pooled({ upstreams: { everything: { url: server.url, transport: 'sse', pool: { min: 1, max: 2 }, timeouts: { acquireMs: 2_000 } } } });
    const listed = await pool.listTools();
    expect(listed.upstreams.everything).toMatchObject({ ok: true });

    // Two long calls take both sessions; the second opens a new one, and server-everything, initialized, says its tools changed.
    const progress = [0, 0];
    const calls = [0, 1].map((index) =>
      pool.callTool(
        'everything',
        'trigger-long-running-operation',
        { duration: 3, steps: 30 },
        { onProgress: () => void (progress[index] = (progress[index] ?? 0) + 1) },
      ),
    );
    // Awaited at the end; if an assertion fails first, closing the pool fails them.
    for (const call of calls) call.catch(() => {});
    // Over SSE a session's messages come in order: once both calls report progress, both sessions' list_changed has arrived.
    await vi.waitFor(() => expect(Math.min(...progress)).toBeGreaterThan(0), { timeout: 5_000, interval: 20 });
    expect(pool.status().everything?.sessions).toMatchObject({ borrowed: 2, opened: 2 });

    let callsEnded = false;
    void Promise.allSettled(calls).then(() => (callsEnded = true));
    const busy = await pool.listTools();
    // While both sessions are still busy (not after a call gave one back, nor after `acquireMs` spent waiting), and not
    // "unavailable": the refresh waits for a session in the background.
    expect(callsEnded).toBe(false);
    expect(pool.status().everything?.sessions).toMatchObject({ borrowed: 2, waiting: 1 });
    expect(busy.upstreams.everything).toEqual({ ok: true, toolCount: listed.tools.length });
    expect(busy.tools.map((tool) => tool.name)).toEqual(listed.tools.map((tool) => tool.name));
    for (const call of await Promise.all(calls)) expect(textOf(call)).toContain('Long running operation completed');
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
        server.server.setRequestHandler(PingRequestSchema, () =>
          behaviour === 'hangs' ? new Promise<never>(() => {}) : Promise.reject(new Error('ping broke')),
        );
        return server;
      };
      const pool = await pooled({
        upstreams: { unhealthy: createInMemoryUpstream(unhealthy, { pool: { min: 1, max: 1 }, timeouts: { idlePingMs: 0, connectMs: 200 } }) },
      });
      expect(textOf(await pool.callTool('unhealthy', 'ok'))).toBe('ok');
      expect(textOf(await pool.callTool('unhealthy', 'ok'))).toBe('ok');
      expect(servers).toBeGreaterThanOrEqual(3);
      expect(pool.status().unhealthy?.calls).toMatchObject({ succeeded: 2, failed: 0 });
    });
  }
});
