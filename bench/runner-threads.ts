// Scenario 13 (issue #42 item 1): runner threads. One mix of tasks run to its end on a runner of one thread and
// on one of two, alternating round by round in one process: half the tasks read an 8 MiB service log (the thread
// parses it, its tokenizer counts it, and it is kept as an artifact: about a quarter of a second of one thread's
// CPU), half read 1 KiB of it a moment later (milliseconds), which on one thread waits behind the heavy ones. The
// model is the OpenAI provider against a local fake of its API (this process, main thread); the log comes from a
// stdio upstream (`log-dump-child.ts`), `pool.max` 8 in all (8 sessions on one thread, 4 on each of two), so no
// call waits for a session. `runner_threads_speedup` is the one-thread runner's time to end the mix over the
// two-thread runner's: at most 2 on two free cores.
import { loadavg } from 'node:os';
import path from 'node:path';
import { createSessionPool, type RunAgentOptions, type SessionPool } from '@klym/core';
import { createThreadRunner, type ThreadRunner } from '@klym/core/engine';
import { startFakeLlmServer } from '../test/support/fake-llm-server.ts';
import { threadCpu } from './proc-cpu.ts';
import { figure, summarize } from './stats.ts';

const KEY = 'sk-bench-key-for-the-fake-0123456789';

/** One round's mix: the time to end it, the light tasks' run times (start to end), and the runner threads' CPU. */
interface Round {
  readonly mixMs: number;
  readonly lightMs: readonly number[];
  /** CPU milliseconds of the runner threads (Node names a worker's thread `WorkerThread`) while the mix ran. */
  readonly runnerCpuMs: number;
}

export async function runnerThreads(options: { readonly quick: boolean }): Promise<string[]> {
  const rounds = options.quick ? 2 : 4;
  const heavyKiB = 8192;
  // Heavy and light in turn, so that each thread gets its share of both.
  const mix: readonly ('heavy' | 'light')[] = Array.from({ length: 8 }, (_, index) => (index % 2 === 0 ? 'heavy' : 'light'));
  // A heavy task reads a big log at once; a light one, as a model that takes its time would, reads 1 KiB of it a
  // moment later (its first answer comes after 300 ms), while the heavy ones' logs are being counted and kept.
  const llm = await startFakeLlmServer((request) => {
    if (request.body.includes('function_call_output')) return { kind: 'turn', text: 'read it' };
    const light = request.body.includes('Glance at the log');
    return { kind: 'turn', toolCalls: [{ name: 'logs__log_dump', args: { kib: light ? 1 : heavyKiB } }], ...(light ? { delayMs: 300 } : {}) };
  });
  const upstreams = {
    logs: { command: process.execPath, args: [path.join(import.meta.dirname, 'log-dump-child.ts')], pool: { min: 1, max: 8 } },
  };
  const pool: SessionPool = await createSessionPool({ upstreams: {} });
  // At the process's own priority: on a shared machine, threads at nice 10 get a tenth of a core's share beside
  // others' work, and the figure would be the neighbours', not the threads'.
  const runners: Record<'one' | 'two', ThreadRunner> = {
    one: createThreadRunner({ upstreams, threads: 1, niceness: 0 }),
    two: createThreadRunner({ upstreams, threads: 2, niceness: 0 }),
  };
  const settings: Omit<RunAgentOptions, 'prompt'> = {
    pool,
    model: 'openai:gpt-4.1-mini',
    providers: { openai: { apiKey: KEY, baseURL: llm.openaiBaseUrl } },
  };
  const names = new Map<number, string>();
  /** CPU milliseconds so far of this process's worker threads: the runners' (the kernel's count; NaN off Linux). */
  const workerCpuMs = (): number => {
    let total = 0;
    for (const [tid, ns] of threadCpu(process.pid, names)) if (names.get(tid) === 'WorkerThread') total += ns / 1e6;
    return names.size === 0 ? Number.NaN : total;
  };
  const runMix = async (runner: ThreadRunner): Promise<Round> => {
    const cpuBefore = workerCpuMs();
    const started = performance.now();
    const lightMs: number[] = [];
    await Promise.all(
      mix.map(async (kind) => {
        const result = await runner({ ...settings, prompt: kind === 'heavy' ? 'Read the service log' : 'Glance at the log' });
        if (result.text !== 'read it') throw new Error(`Expected the run to end with "read it", got ${JSON.stringify(result.text)} (${result.finishReason})`);
        if (kind === 'light') lightMs.push(performance.now() - started);
      }),
    );
    return { mixMs: performance.now() - started, lightMs, runnerCpuMs: workerCpuMs() - cpuBefore };
  };
  try {
    // Each runner's threads started, their pools connected and their tokenizers loaded before anything is timed.
    await runMix(runners.one);
    await runMix(runners.two);
    const samples: Record<'one' | 'two', Round[]> = { one: [], two: [] };
    for (let round = 0; round < rounds; round++) {
      const order: ('one' | 'two')[] = round % 2 === 0 ? ['one', 'two'] : ['two', 'one'];
      for (const key of order) samples[key].push(await runMix(runners[key]));
    }
    const mixOf = (key: 'one' | 'two') => summarize(samples[key].map((sample) => sample.mixMs));
    const lightOf = (key: 'one' | 'two') => summarize(samples[key].flatMap((sample) => sample.lightMs));
    const [one, two] = [mixOf('one'), mixOf('two')];
    const [lightOne, lightTwo] = [lightOf('one'), lightOf('two')];
    const cpuOf = (key: 'one' | 'two') => summarize(samples[key].map((sample) => sample.runnerCpuMs)).median;
    const row = (label: string, key: 'one' | 'two', mixMs: ReturnType<typeof summarize>, light: ReturnType<typeof summarize>) =>
      `| ${label} | ${mixMs.median.toFixed(0)} | ${mixMs.max.toFixed(0)} | ${light.median.toFixed(0)} | ${cpuOf(key).toFixed(0)} |`;
    return [
      `${mix.length} tasks a round (${mix.filter((kind) => kind === 'heavy').length} reading ${heavyKiB} KiB of log, the others 1 KiB of it after 300 ms), ${rounds} rounds each, alternating; load average at the start ${loadAverage()}.`,
      '',
      "| runner | mix ends, median ms | mix, max ms | a light task ends, median ms | runner threads' CPU a mix, median ms |",
      '|---|---:|---:|---:|---:|',
      row('1 thread', 'one', one, lightOne),
      row('2 threads', 'two', two, lightTwo),
      '',
      figure('runner_threads_speedup', one.median / two.median),
      figure('runner_threads_light_task_ratio', lightOne.median / lightTwo.median),
    ];
  } finally {
    await Promise.allSettled([runners.one.close(), runners.two.close()]);
    await pool.close();
    await llm.close();
  }
}

function loadAverage(): string {
  return loadavg()
    .map((value) => value.toFixed(2))
    .join(' ');
}
