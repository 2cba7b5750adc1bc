// Scenario 3 (issue #3): the pool under failure, in figures. Against server-everything in its own
// process: how long a call in flight takes to fail after the upstream is killed (SIGKILL), and how long
// after a restart on the same port the first call succeeds again, nobody acting. Against a dead
// upstream (a port that accepts and drops every connection): connect attempts per second while callers
// keep asking, with the circuit breaker's defaults.
import { once } from 'node:events';
import { createServer } from 'node:net';
import { createSessionPool } from '@klym/core';
import { startServerEverything } from '../test/support/upstream-servers.ts';
import { figure, ms, summarize } from './stats.ts';

export async function failureFigures(options: { rounds: number }): Promise<string[]> {
  const rows = ['| transport | in-flight call fails after kill (median, max) | first success after restart (median, max) |', '| --- | --- | --- |'];
  const figures: string[] = [];
  for (const [transport, kind] of [
    ['sse', 'sse'],
    ['streamableHttp', 'streamable-http'],
  ] as const) {
    const failed: number[] = [];
    const recovered: number[] = [];
    let server = await startServerEverything(transport);
    const pool = await createSessionPool({ upstreams: { everything: { url: server.url, transport: kind } } });
    await pool.warmedUp();
    try {
      for (let round = 0; round < options.rounds; round++) {
        const call = pool.callTool('everything', 'trigger-long-running-operation', { duration: 30, steps: 30 }).catch(() => undefined);
        while (pool.status().everything?.sessions.borrowed !== 1) await new Promise(setImmediate);
        const killedAt = performance.now();
        await server.stop({ hard: true });
        await call;
        failed.push(performance.now() - killedAt);

        server = await startServerEverything(transport, server.port);
        const restartedAt = performance.now();
        for (;;) {
          const ok = await pool.callTool('everything', 'echo', { message: 'back' }).then(
            () => true,
            () => false,
          );
          if (ok) break;
          await new Promise((resolve) => setTimeout(resolve, 10));
        }
        recovered.push(performance.now() - restartedAt);
        // Each round is one restart: a session must outlive the breaker's cooldown (1 s) to count as a
        // good connect, so a kill sooner would be a crash loop, which the breaker backs off on purpose.
        await new Promise((resolve) => setTimeout(resolve, 1_500));
      }
    } finally {
      await pool.close({ drainTimeoutMs: 100 });
      await server.stop();
    }
    const [a, b] = [summarize(failed), summarize(recovered)];
    rows.push(`| ${kind} | ${ms(a.median)}, ${ms(Math.max(...failed))} | ${ms(b.median)}, ${ms(Math.max(...recovered))} |`);
    figures.push(figure(`inflight_fail_ms_${kind.replace('-', '_')}`, a.median), figure(`recovery_ms_${kind.replace('-', '_')}`, b.median));
  }
  rows.push('', ...(await deadUpstream(3_000)), '', ...figures);
  return rows;
}

/** Connect attempts per second against a port that drops every connection, while 20 callers keep calling. */
async function deadUpstream(durationMs: number): Promise<string[]> {
  let connects = 0;
  const dead = createServer((socket) => {
    connects++;
    socket.destroy();
  });
  dead.listen(0, '127.0.0.1');
  await once(dead, 'listening');
  const { port } = dead.address() as { port: number };
  const pool = await createSessionPool({ upstreams: { dead: { url: `http://127.0.0.1:${port}/sse`, transport: 'sse', timeouts: { acquireMs: 500 } } } });
  await pool.warmedUp();
  const cpuBefore = process.cpuUsage();
  const until = performance.now() + durationMs;
  let calls = 0;
  await Promise.all(
    Array.from({ length: 20 }, async () => {
      while (performance.now() < until) {
        calls++;
        await pool.callTool('dead', 'anything').catch(() => undefined);
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
    }),
  );
  const cpu = process.cpuUsage(cpuBefore);
  const breaker = pool.status().dead?.breaker;
  await pool.close();
  dead.close();
  const seconds = durationMs / 1000;
  return [
    `Dead upstream, 20 callers for ${seconds} s (${calls} calls, each refused): ${(connects / seconds).toFixed(1)} connects/s reached the port;`,
    `the breaker opened ${breaker?.opens ?? 0} times; the process used ${(((cpu.user + cpu.system) / 1e3 / durationMs) * 100).toFixed(0)}% of one core, the callers' own loop included.`,
    figure('dead_upstream_connects_per_s', connects / seconds, 1),
  ];
}
