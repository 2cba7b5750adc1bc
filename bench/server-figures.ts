// Scenarios 4-6 (issue #6): the Klym server's figures. Klym runs in its own process (bench/klym-child.ts),
// the fake grynya in another; this process is the client (the official SDK client over Streamable HTTP).
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import path from 'node:path';
import { Role } from '@a2a-js/sdk';
import { ClientFactory } from '@a2a-js/sdk/client';
import { Client as Mcp20260728Client, StreamableHTTPClientTransport as Mcp20260728Transport } from '@modelcontextprotocol/client';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js';
import { freePort } from '../test/support/upstream-servers.ts';
import { processCpuMs, threadCpu } from './proc-cpu.ts';
import { startFakeGrynyaProcess, type ChildServer } from './servers.ts';
import { figure, ms, ratio, summarize } from './stats.ts';
import { frontBurst } from './front-burst.ts';
import { startInputResume } from './input-resume.ts';
import { statusAtLoad } from './status-at-load.ts';
import { client, scenarioFiveOptions, startKlymChild, startAsFastAsAnswered, startStatusPoller, waitUntilIdle, within, type KlymChild } from './klym-server.ts';

const root = path.resolve(import.meta.dirname, '..');
const MiB = 2 ** 20;

/**
 * Scenario 4: `start_async_agent_task` round trip while ~200 tasks run, against `ping` on the same server; and,
 * interleaved with them under the same load, an answer's resume (issue #40): from `reply_to_agent_task` to the
 * resumed run's next model call.
 */
async function startUnderLoad(grynya: ChildServer, samples: number): Promise<string[]> {
  const asking = await startInputResume();
  const klym = await startKlymChild({
    port: 0,
    upstreams: { grynya: { url: grynya.sseUrl, transport: 'sse', pool: { min: 4, max: 20 } } },
    // As `klym serve` runs them: on the runner thread. The load's self-checks run on the default scripted model.
    tasks: { maxConcurrent: 1_000, ttlMs: 60_000, shutdownGraceMs: 0, runner: 'thread', ...asking.taskOptions },
  });
  const grynyaClient = await client(klym.mcpUrl);
  // The same start over protocol 2026-07-28: stateless, so each request carries its envelope and is served by one
  // of the few servers the handler reuses.
  const mcp20260728Client = new Mcp20260728Client({ name: 'bench-2026', version: '1.0.0' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } });
  await mcp20260728Client.connect(new Mcp20260728Transport(new URL(klym.mcpUrl)));
  try {
    const start = () => grynyaClient.callTool({ name: 'start_async_agent_task', arguments: { prompt: 'self-check' } });
    const startMcp20260728 = () => mcp20260728Client.callTool({ name: 'start_async_agent_task', arguments: { prompt: 'self-check' } });
    // The same start over A2A (issue #32): SendMessage with returnImmediately, the SDK's own client from the card.
    const a2aClient = await new ClientFactory().createFromUrl(klym.url);
    const sendA2a = () =>
      a2aClient.sendMessage({
        tenant: '',
        message: {
          messageId: crypto.randomUUID(),
          contextId: '',
          taskId: '',
          role: Role.ROLE_USER,
          parts: [{ content: { $case: 'text', value: 'self-check' }, metadata: undefined, filename: '', mediaType: 'text/plain' }],
          metadata: undefined,
          extensions: [],
          referenceTaskIds: [],
        },
        configuration: { acceptedOutputModes: [], taskPushNotificationConfig: undefined, returnImmediately: true },
        metadata: undefined,
      });
    // The load: 200 tasks whose upstream calls each take 2 s (the fake's delay), 20 at a time per session pool.
    await Promise.all(Array.from({ length: 200 }, start));
    const running = (await klym.ask<{ tasks: Record<string, number> }>('stats')).tasks;
    const startTimes: number[] = [];
    const pingTimes: number[] = [];
    const mcp20260728Times: number[] = [];
    const a2aTimes: number[] = [];
    const resumeTimes: number[] = [];
    // A run that returns a number measured its own span (the resume's: from the reply, not from the start).
    const series = [
      [start, startTimes],
      [() => grynyaClient.ping(), pingTimes],
      [startMcp20260728, mcp20260728Times],
      [sendA2a, a2aTimes],
      [() => asking.sample(grynyaClient), resumeTimes],
    ] as [() => Promise<unknown>, number[]][];
    for (let index = 0; index < samples; index++) {
      // Each round in another order, so that none of them always follows the same one.
      for (const [run, times] of [...series.slice(index % series.length), ...series.slice(0, index % series.length)]) {
        const began = performance.now();
        const measured = await run();
        times.push(typeof measured === 'number' ? measured : performance.now() - began);
      }
    }
    const [a, b, m, s, r] = [summarize(startTimes), summarize(pingTimes), summarize(mcp20260728Times), summarize(a2aTimes), summarize(resumeTimes)];
    return [
      '| request, while 200 tasks run | p50 | p99 |',
      '| --- | --- | --- |',
      `| start_async_agent_task (2025-11-25 session) | ${ms(a.median)} | ${ms(a.p99)} |`,
      `| ping (no-op, same server) | ${ms(b.median)} | ${ms(b.p99)} |`,
      `| start_async_agent_task (2026-07-28, stateless) | ${ms(m.median)} | ${ms(m.p99)} |`,
      `| A2A SendMessage, returnImmediately | ${ms(s.median)} | ${ms(s.p99)} |`,
      `| an answer's resume: reply_to_agent_task → the run's next model call | ${ms(r.median)} | ${ms(r.p99)} |`,
      '',
      `start ÷ no-op: ${ratio(a.median / b.median)} at p50, ${ratio(a.p99 / b.p99)} at p99; 2026 start ÷ 2025 start: ${ratio(m.median / a.median)} at p50; A2A send ÷ 2025 start: ${ratio(s.median / a.median)} at p50 (${samples} of each, interleaved; tasks when measuring began: ${JSON.stringify(running)}).`,
      '',
      figure('start_p50_ms', a.median),
      figure('start_p99_ms', a.p99),
      figure('start_ping_ratio_p50', a.median / b.median),
      figure('start_ping_ratio_p99', a.p99 / b.p99),
      figure('start_2026_p50_ms', m.median),
      figure('start_2026_vs_2025_ratio_p50', m.median / a.median),
      figure('a2a_send_p50_ms', s.median),
      figure('a2a_send_vs_start_ratio_p50', s.median / a.median),
      figure('input_resume_ms_p50', r.median),
      figure('input_resume_ms_p99', r.p99),
    ];
  } finally {
    await mcp20260728Client.close();
    await grynyaClient.close();
    await klym.stop();
    await asking.close();
  }
}

/** Scenario 5: 1,000 tasks × 5 upstream calls through Klym against the raw SDK client making the same 5,000 calls. */
async function throughput(grynya: ChildServer, tasks: number, concurrency: number): Promise<string[]> {
  const klym = await startKlymChild(scenarioFiveOptions(grynya, concurrency));
  const grynyaClient = await client(klym.mcpUrl);
  try {
    // Warm-up: tool lists cached, sessions open, code paths compiled.
    await Promise.all(Array.from({ length: concurrency }, () => grynyaClient.callTool({ name: 'start_async_agent_task', arguments: { prompt: 'warm-up' } })));
    await waitUntilIdle(klym);
    await klym.ask('gc');
    const before = await klym.ask<{ rss: number; heapUsed: number; cpuMs: number }>('stats');
    const threadsBefore = threadCpu(klym.pid);
    await klym.ask('reset');

    const began = performance.now();
    // Grynya polling while the runner is saturated: check_task_status on the newest task every 20 ms, from its own process.
    const poller = await startStatusPoller(klym.mcpUrl, klym.floorUrl);
    // Every process on the machine's cores during the run, for what the cores allow (see `cpuBound` below).
    const cpuBefore = { grynya: processCpuMs(grynya.child.pid), callers: cpuMsOfThisProcess(), poller: processCpuMs(poller.pid) };
    await startAsFastAsAnswered(grynyaClient, tasks, poller);
    // The starts are answered long before the tasks end: polls from here on share the front with task execution only.
    const startsAnswered = performance.timeOrigin + performance.now();
    await waitUntilIdle(klym);
    const cpuAfter = { grynya: processCpuMs(grynya.child.pid), callers: cpuMsOfThisProcess(), poller: processCpuMs(poller.pid) };
    const polls = await poller.stop();
    const status = summarize(polls.times);
    const [whileStarting, afterStarts] = [within(polls, 0, startsAnswered), within(polls, startsAnswered, Infinity)];
    const floor = { starting: within(polls.floor, 0, startsAnswered), running: within(polls.floor, startsAnswered, Infinity) };
    const klymSeconds = (performance.now() - began) / 1000;
    const during = await klym.ask<{ delayP99Ms: number; delayMaxMs: number; cpuMs: number; tasks: Record<string, number> }>('stats');
    // The runner thread: the busiest of Klym's threads but the serving one (ms over the run).
    const runnerMs = Math.max(...[...threadCpu(klym.pid)].filter(([tid]) => tid !== klym.pid).map(([tid, ns]) => (ns - (threadsBefore.get(tid) ?? 0)) / 1e6));
    await klym.ask('gc');
    const after = await klym.ask<{ rss: number; heapUsed: number }>('stats');
    await new Promise((resolve) => setTimeout(resolve, 6_000)); // past the 3 s TTL and its sweep
    await klym.ask('gc');
    const evicted = await klym.ask<{ rss: number; heapUsed: number; tasks: Record<string, number> }>('stats');

    // The least any MCP server on this stack spends answering a request: \`ping\` (no task, none of Klym's
    // tools) from the same 16 callers, as many as there were tasks; Klym's process's CPU and the callers'.
    const pingCpu = await pingCost(grynyaClient, klym, tasks);

    const rawCpuBefore = { grynya: processCpuMs(grynya.child.pid), clients: cpuMsOfThisProcess(), thread: mainThreadMs() };
    const rawSeconds = await rawThroughput(grynya, tasks, concurrency);
    const rawCpu = {
      grynya: processCpuMs(grynya.child.pid) - rawCpuBefore.grynya,
      clients: cpuMsOfThisProcess() - rawCpuBefore.clients,
      // The raw clients all run on this process's one thread, as Klym's calls run on its runner thread.
      thread: mainThreadMs() - rawCpuBefore.thread,
    };
    const klymRate = (tasks * 5) / klymSeconds;
    const rawRate = (tasks * 5) / rawSeconds;
    // The CPU each process spent per task; all of it shares the machine's cores, so the run cannot take less
    // than its sum over the cores, whatever the scheduling: the ratio Klym's CPU cost allows on this machine.
    const perTask = (from: number, to: number): number => (to - from) / tasks;
    const spent = {
      klym: perTask(before.cpuMs, during.cpuMs),
      grynya: perTask(cpuBefore.grynya, cpuAfter.grynya),
      callers: perTask(cpuBefore.callers, cpuAfter.callers),
      poller: perTask(cpuBefore.poller, cpuAfter.poller),
    };
    const cores = availableParallelism();
    const cpuBoundSeconds = ((spent.klym + spent.grynya + spent.callers + spent.poller) * tasks) / 1000 / cores;
    // The floor: a server whose every task costs only the raw run's five calls (its clients' CPU and the fake
    // grynya's) and one request answered as cheaply as a ping (Klym's process and the callers'), no poller.
    // Were the runs as CPU-bound as each other, no such server could pass \`floorRatio\` of raw throughput.
    const rawPerTask = (rawCpu.clients + rawCpu.grynya) / tasks;
    const floorPerTask = rawPerTask + pingCpu.server + pingCpu.callers;
    const floorSeconds = (floorPerTask * tasks) / 1000 / cores;
    const rawCoresBusy = (rawPerTask * tasks) / 1000 / cores / rawSeconds;
    const mb = (bytes: number): string => `${(bytes / MiB).toFixed(1)} MiB`;
    return [
      `| ${tasks} tasks × 5 upstream calls, ${concurrency} at a time | time | upstream calls/s |`,
      '| --- | --- | --- |',
      `| through Klym (scripted model, 5 upstreams → one fake grynya) | ${klymSeconds.toFixed(2)} s | ${klymRate.toFixed(0)} |`,
      `| raw SDK clients, same calls, same concurrency | ${rawSeconds.toFixed(2)} s | ${rawRate.toFixed(0)} |`,
      '',
      `check_task_status while the runner is saturated (${status.count} polls, every 20 ms, from their own process): p50 ${ms(status.median)}, p99 ${ms(status.p99)};` +
        ` while the 16 callers' starts were still arriving (${whileStarting.count} polls, the first ${((startsAnswered - performance.timeOrigin - began) / 1000).toFixed(2)} s) p50 ${ms(whileStarting.median)}, p99 ${ms(whileStarting.p99)};` +
        ` after the last start was answered, with tasks still running (${afterStarts.count} polls) p50 ${ms(afterStarts.median)}, p99 ${ms(afterStarts.p99)}.` +
        ` The floor, a trivial endpoint on an idle thread of Klym's process asked between the polls: p99 ${ms(floor.starting.p99)} while the starts arrived, ${ms(floor.running.p99)} after.`,
      `Klym ÷ raw throughput: ${((klymRate / rawRate) * 100).toFixed(0)}%. Klym's process used ${((during.cpuMs - before.cpuMs) / tasks).toFixed(2)} ms of CPU per task (${(((during.cpuMs - before.cpuMs) / 1000 / klymSeconds) * 100).toFixed(0)}% of one core). Its event-loop delay during the run: p99 ${ms(during.delayP99Ms)}, max ${ms(during.delayMaxMs)}. Tasks: ${JSON.stringify(during.tasks)}.`,
      `CPU per task, by process: Klym ${spent.klym.toFixed(2)} ms, the fake grynya ${spent.grynya.toFixed(2)} ms, the 16 callers (this process) ${spent.callers.toFixed(2)} ms, the poller ${spent.poller.toFixed(2)} ms;` +
        ` on ${cores} cores the ${tasks} tasks need at least ${cpuBoundSeconds.toFixed(2)} s (took ${klymSeconds.toFixed(2)} s), so Klym's CPU allows at most ${((rawSeconds / cpuBoundSeconds) * 100).toFixed(0)}% of raw throughput here.` +
        ` The raw run: its clients ${(rawCpu.clients / tasks).toFixed(2)} ms a task (5 calls), the fake grynya ${(rawCpu.grynya / tasks).toFixed(2)} ms, its cores ${(rawCoresBusy * 100).toFixed(0)}% busy.`,
      `The floor: a ping costs Klym's process ${pingCpu.server.toFixed(2)} ms and the callers ${pingCpu.callers.toFixed(2)} ms (${tasks} pings, 16 at a time);` +
        ` a server whose task cost only the raw run's five calls (${rawPerTask.toFixed(2)} ms) and one request answered as a ping needs ${floorPerTask.toFixed(2)} ms a task,` +
        ` ${floorSeconds.toFixed(2)} s on ${cores} cores: at most ${((rawSeconds / floorSeconds) * 100).toFixed(0)}% of raw throughput here, ${((rawPerTask / floorPerTask) * 100).toFixed(0)}% by CPU alone.` +
        ` Klym's run spent ${(spent.klym + spent.grynya + spent.callers).toFixed(2)} ms a task without the poller (${((rawPerTask / (spent.klym + spent.grynya + spent.callers)) * 100).toFixed(0)}% by CPU).`,
      `Each run's busiest thread: Klym's runner thread ${(runnerMs / tasks).toFixed(2)} ms a task, the raw clients' one thread ${(rawCpu.thread / tasks).toFixed(2)} ms (5 calls):` +
        ` where each run waits on that thread, Klym can reach ${((rawCpu.thread / runnerMs) * 100).toFixed(0)}% of raw throughput.`,
      `Klym's memory after GC: before ${mb(before.rss)} RSS / ${mb(before.heapUsed)} heap; after ${tasks} finished tasks ${mb(after.rss)} / ${mb(after.heapUsed)}` +
        ` (heap retained: ${mb(after.heapUsed - before.heapUsed)} per ${tasks} tasks); after the TTL evicted them ${mb(evicted.rss)} / ${mb(evicted.heapUsed)}.`,
      '',
      figure('throughput_ratio', klymRate / rawRate),
      figure('cpu_ms_per_task', (during.cpuMs - before.cpuMs) / tasks),
      figure('throughput_ratio_cpu_bound', rawSeconds / cpuBoundSeconds),
      figure('throughput_ratio_floor', rawSeconds / floorSeconds),
      figure('throughput_ratio_floor_cpu', rawPerTask / floorPerTask),
      figure('throughput_ratio_cpu', rawPerTask / (spent.klym + spent.grynya + spent.callers)),
      figure('raw_cores_busy', rawCoresBusy),
      figure('runner_thread_cpu_ms_per_task', runnerMs / tasks),
      figure('raw_client_thread_cpu_ms_per_task', rawCpu.thread / tasks),
      figure('throughput_ratio_thread', rawCpu.thread / runnerMs),
      figure('ping_cpu_ms', pingCpu.server),
      figure('loop_delay_p99_saturated_ms', during.delayP99Ms),
      figure('status_p50_saturated_ms', status.median),
      figure('status_p99_saturated_ms', status.p99),
      figure('status_p99_saturated_starting_ms', whileStarting.p99),
      figure('status_p99_saturated_running_ms', afterStarts.p99),
      figure('floor_p99_saturated_starting_ms', floor.starting.p99),
      figure('floor_p99_saturated_running_ms', floor.running.p99),
      figure('status_floor_ratio_saturated_starting', whileStarting.p99 / floor.starting.p99),
      figure('status_floor_ratio_saturated_running', afterStarts.p99 / floor.running.p99),
      figure('heap_retained_mib_per_1000_tasks', ((after.heapUsed - before.heapUsed) / MiB) * (1_000 / tasks), 1),
    ];
  } finally {
    await grynyaClient.close();
    await klym.stop();
  }
}

/** The CPU (ms) one MCP \`ping\` costs Klym's process and the callers (this process): \`count\` of them, 16 at a time. */
async function pingCost(callers: Client, klym: KlymChild, count: number): Promise<{ server: number; callers: number }> {
  for (let index = 0; index < 200; index++) await callers.ping();
  const before = { server: (await klym.ask<{ cpuMs: number }>('stats')).cpuMs, callers: cpuMsOfThisProcess() };
  let sent = 0;
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (sent < count) {
        sent++;
        await callers.ping();
      }
    }),
  );
  const callersAfter = cpuMsOfThisProcess();
  const server = (await klym.ask<{ cpuMs: number }>('stats')).cpuMs;
  return { server: (server - before.server) / count, callers: (callersAfter - before.callers) / count };
}

async function rawThroughput(grynya: ChildServer, tasks: number, concurrency: number): Promise<number> {
  const clients = await Promise.all(
    Array.from({ length: concurrency }, async () => {
      const raw = new Client({ name: 'bench-raw', version: '1.0.0' });
      await raw.connect(new SSEClientTransport(new URL(grynya.sseUrl)));
      return raw;
    }),
  );
  try {
    let done = 0;
    const began = performance.now();
    await Promise.all(
      clients.map(async (raw) => {
        while (done < tasks) {
          done++;
          for (let call = 0; call < 5; call++) await raw.callTool({ name: 'query_graph', arguments: { query: 'RETURN 1' } });
        }
      }),
    );
    return (performance.now() - began) / 1000;
  } finally {
    await Promise.all(clients.map((raw) => raw.close()));
  }
}

/** Scenario 6: `klym serve` from process start to `GET /healthz` answering 200, with the fake grynya as its upstream. */
async function coldStart(grynya: ChildServer, rounds: number): Promise<string[]> {
  const times: number[] = [];
  // Its own working directory: `klym serve` keeps its tasks in .klym/ there, as it would in production.
  const cwd = mkdtempSync(path.join(tmpdir(), 'klym-bench-cold-'));
  for (let round = 0; round < rounds; round++) {
    const port = await freePort();
    const began = performance.now();
    const child: ChildProcess = spawn(
      process.execPath,
      ['--conditions=klym-source', path.join(root, 'apps/server/src/main.ts'), 'serve', '--port', String(port), '--upstream', `grynya=${grynya.sseUrl}`],
      { stdio: ['ignore', 'ignore', 'pipe'], cwd },
    );
    let stderr = '';
    child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    try {
      for (;;) {
        const ok = await fetch(`http://127.0.0.1:${port}/healthz`).then(
          (response) => response.status === 200,
          () => false,
        );
        if (ok) break;
        if (child.exitCode !== null) throw new Error(`klym serve exited with ${child.exitCode}: ${stderr.trim()}`);
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
      times.push(performance.now() - began);
    } finally {
      // A server that has already exited (a config it refused) sends no second 'exit' to wait for.
      if (child.exitCode === null && child.signalCode === null) {
        const exited = once(child, 'exit');
        child.kill('SIGTERM');
        await exited;
      }
    }
  }
  rmSync(cwd, { recursive: true, force: true });
  const summary = summarize(times);
  return [
    `\`klym serve\` from process start to \`GET /healthz\` 200: median ${ms(summary.median)}, max ${ms(Math.max(...times))} (${rounds} starts).`,
    '',
    figure('cold_start_ms', summary.median, 0),
  ];
}

/**
 * Scenario 7 (issue #10): two Klym servers side by side, one keeping tasks in memory and one in SQLite:
 * `start_async_agent_task` round trips (alternating between the two), the CPU each spends per task (a
 * self-check: two model steps and one upstream call, every step logged and checkpointed), and each one's
 * event-loop delay while it works.
 */
async function storeThroughServer(grynya: ChildServer, samples: number): Promise<string[]> {
  const directory = mkdtempSync(path.join(tmpdir(), 'klym-bench-server-store-'));
  const common = { port: 0, upstreams: { grynya: { url: grynya.sseUrl, transport: 'sse' as const, pool: { min: 2, max: 8 } } } };
  const tasks = { maxConcurrent: 8, ttlMs: 600_000, shutdownGraceMs: 0 };
  const servers = {
    memory: await startKlymChild({ ...common, tasks: { ...tasks, store: 'memory' } }),
    sqlite: await startKlymChild({ ...common, tasks: { ...tasks, store: `sqlite:${path.join(directory, 'tasks.db')}` } }),
  };
  const clients = { memory: await client(servers.memory.mcpUrl), sqlite: await client(servers.sqlite.mcpUrl) };
  try {
    const start = (name: 'memory' | 'sqlite') => clients[name].callTool({ name: 'start_async_agent_task', arguments: { prompt: 'self-check' } });
    // Warm-up: code paths compiled, sessions open, tool lists cached.
    for (const name of ['memory', 'sqlite'] as const) {
      await Promise.all(Array.from({ length: 20 }, () => start(name)));
      await waitUntilIdle(servers[name]);
      await servers[name].ask('reset');
    }
    const cpuBefore = {
      memory: (await servers.memory.ask<{ cpuMs: number }>('stats')).cpuMs,
      sqlite: (await servers.sqlite.ask<{ cpuMs: number }>('stats')).cpuMs,
    };
    const times = { memory: [] as number[], sqlite: [] as number[] };
    for (let index = 0; index < samples; index++) {
      for (const name of index % 2 === 0 ? (['memory', 'sqlite'] as const) : (['sqlite', 'memory'] as const)) {
        const began = performance.now();
        await start(name);
        times[name].push(performance.now() - began);
      }
    }
    const figures = { memory: summarize(times.memory), sqlite: summarize(times.sqlite) };
    const after: Record<string, { cpuMs: number; delayP99Ms: number; delayMaxMs: number }> = {};
    for (const name of ['memory', 'sqlite'] as const) {
      await waitUntilIdle(servers[name]);
      after[name] = await servers[name].ask('stats');
    }
    const cpu = (name: 'memory' | 'sqlite'): number => ((after[name]?.cpuMs ?? 0) - cpuBefore[name]) / samples;
    const row = (name: 'memory' | 'sqlite') =>
      `| ${name} | ${ms(figures[name].median)} | ${ms(figures[name].p99)} | ${cpu(name).toFixed(2)} ms | ${ms(after[name]?.delayP99Ms ?? 0)} / ${ms(after[name]?.delayMaxMs ?? 0)} |`;
    return [
      `| task store | start p50 | start p99 | CPU per task | event-loop delay p99 / max |`,
      '| --- | --- | --- | --- | --- |',
      row('memory'),
      row('sqlite'),
      '',
      `sqlite ÷ memory: start ${ratio(figures.sqlite.median / figures.memory.median)} at p50, ${ratio(figures.sqlite.p99 / figures.memory.p99)} at p99; CPU per task ${ratio(cpu('sqlite') / cpu('memory'))} (${samples} starts on each, alternating, each task a self-check run to the end).`,
      figure('store_server_start_p99_ratio', figures.sqlite.p99 / figures.memory.p99),
      figure('store_server_cpu_ratio', cpu('sqlite') / cpu('memory')),
    ];
  } finally {
    await Promise.all([clients.memory.close(), clients.sqlite.close()]);
    await Promise.all([servers.memory.stop(), servers.sqlite.stop()]);
    rmSync(directory, { recursive: true, force: true });
  }
}

/** Scenario 4 alone (`pnpm bench --only start`): the starts under load beside an answer's resume. */
export async function startFigures(options: { quick: boolean }): Promise<string[]> {
  const slow = await startFakeGrynyaProcess({ delayMs: 2_000 });
  try {
    return await startUnderLoad(slow, options.quick ? 100 : 300);
  } finally {
    await slow.stop();
  }
}

export async function serverFigures(options: { quick: boolean }): Promise<string[]> {
  const slow = await startFakeGrynyaProcess({ delayMs: 2_000 });
  const fast = await startFakeGrynyaProcess();
  try {
    return [
      '### 4. start_async_agent_task under load\n',
      ...(await startUnderLoad(slow, options.quick ? 100 : 300)),
      '\n### 5. Throughput, event-loop delay and memory\n',
      ...(await throughput(fast, options.quick ? 200 : 1_000, 50)),
      '\n### 5b. check_task_status at 70% load\n',
      ...(await statusAtLoad(fast, options.quick ? 200 : 600)),
      '\n### 5c. check_task_status while requests pour in: starts against pings at their rate\n',
      ...(await frontBurst(fast, options.quick ? 400 : 2_000)),
      '\n### 6. Cold start\n',
      ...(await coldStart(fast, options.quick ? 3 : 5)),
      '\n### 7. The task store: SQLite against memory, through the server\n',
      ...(await storeThroughServer(fast, options.quick ? 100 : 400)),
    ];
  } finally {
    await slow.stop();
    await fast.stop();
  }
}

/** Milliseconds of CPU this process's main thread (the raw clients' one) has used so far. */
function mainThreadMs(): number {
  return (threadCpu(process.pid).get(process.pid) ?? Number.NaN) / 1e6;
}

/** Milliseconds of CPU this process (the benchmark's client) has used so far. */
function cpuMsOfThisProcess(): number {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
}
