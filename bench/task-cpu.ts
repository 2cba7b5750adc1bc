// `node --conditions=klym-source bench/task-cpu.ts [--tasks 300] [--rounds 6] [--against <checkout>]`:
// the CPU one scenario-5 task costs Klym's process, thread by thread, from the kernel's own accounting
// (/proc/<pid>/task/<tid>/schedstat: nanoseconds on a CPU), which a busy machine slows but does not
// inflate the way it does wall-clock figures. With `--against`, another checkout's server (the code
// before a change) is measured too, the two alternating round by round. Linux only.
// KLYM_BENCH_THREADS=1 prints each round's CPU by thread name (V8Worker: V8's GC and compiler helpers);
// KLYM_BENCH_PERF='record -e cpu-clock -F 1999 -g' (or 'stat --per-thread -e …') runs perf on Klym's
// process for the measured part, with KLYM_BENCH_NODE_ARGS=--perf-basic-prof to name its JS frames.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { threadCpu } from './proc-cpu.ts';
import { client, scenarioFiveOptions, startKlymChild, waitUntilIdle, type KlymChild } from './klym-server.ts';
import { startFakeGrynyaProcess, type ChildServer } from './servers.ts';
import { summarize } from './stats.ts';

const { values } = parseArgs({ options: { tasks: { type: 'string', default: '300' }, rounds: { type: 'string', default: '6' }, against: { type: 'string' } } });
const tasks = Number(values.tasks);
const rounds = Number(values.rounds);
const here = path.resolve(import.meta.dirname, '..');
const trees: Record<string, string> = { ...(values.against === undefined ? {} : { before: path.resolve(values.against) }), now: here };

const threadNames = new Map<number, string>();

const sum = (cpu: Map<number, number>): number => [...cpu.values()].reduce((total, value) => total + value, 0);

interface Sample {
  readonly main: number;
  readonly runner: number;
  readonly other: number;
  readonly grynya: number;
}

async function measure(grynya: ChildServer, root: string): Promise<Sample> {
  const klym: KlymChild = await startKlymChild(scenarioFiveOptions(grynya, 50), root);
  const grynyaClient = await client(klym.mcpUrl);
  try {
    const start = () => grynyaClient.callTool({ name: 'start_async_agent_task', arguments: { prompt: 'self-check' } });
    for (let warm = 0; warm < 2; warm++) {
      await Promise.all(Array.from({ length: 50 }, start));
      await waitUntilIdle(klym);
    }
    // `KLYM_BENCH_PERF='record -e cpu-clock -F 1999 -g'` (or `stat -e …`): perf on Klym's process for the measured part, its output in /tmp.
    const perfArgs = process.env.KLYM_BENCH_PERF?.split(' ').filter(Boolean);
    const perf =
      perfArgs === undefined
        ? undefined
        : spawn('perf', [...perfArgs, '-p', String(klym.pid), '-o', `/tmp/klym-perf.${path.basename(root)}.${klym.pid}`], { stdio: 'ignore' });
    if (perf !== undefined) await new Promise((resolve) => setTimeout(resolve, 500));
    const before = threadCpu(klym.pid, threadNames);
    const grynyaBefore = sum(threadCpu(grynya.child.pid ?? 0));
    let started = 0;
    let refused = 0;
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        while (started < tasks) {
          started++;
          if ((await start()).isError === true) refused++;
        }
      }),
    );
    await waitUntilIdle(klym);
    const after = threadCpu(klym.pid, threadNames);
    // Each task must have run: a refused start (a full queue) costs a fraction of one.
    if (refused > 0) throw new Error(`${refused} of ${tasks} starts were refused; measure fewer tasks`);
    if (perf !== undefined) {
      perf.kill('SIGINT');
      await once(perf, 'exit');
    }
    const grynyaSpent = sum(threadCpu(grynya.child.pid ?? 0)) - grynyaBefore;
    const spent = [...after].map(([tid, ns]) => [tid, ns - (before.get(tid) ?? 0)] as const);
    const main = spent.find(([tid]) => tid === klym.pid)?.[1] ?? 0;
    // The runner thread is the busiest thread that is not the main one.
    const runner = Math.max(...spent.filter(([tid]) => tid !== klym.pid).map(([, ns]) => ns));
    const total = spent.reduce((all, [, ns]) => all + ns, 0);
    if (process.env.KLYM_BENCH_THREADS) {
      const byName = new Map<string, number>();
      for (const [tid, ns] of spent) byName.set(threadNames.get(tid) ?? '?', (byName.get(threadNames.get(tid) ?? '?') ?? 0) + ns);
      console.log([...byName].map(([name, ns]) => `${name} ${(ns / 1e6 / tasks).toFixed(3)}`).join(', '));
    }
    const perTask = (ns: number): number => ns / 1e6 / tasks;
    return { main: perTask(main), runner: perTask(runner), other: perTask(total - main - runner), grynya: perTask(grynyaSpent) };
  } finally {
    await grynyaClient.close();
    await klym.stop();
  }
}

const grynya = await startFakeGrynyaProcess();
const samples: Record<string, Sample[]> = Object.fromEntries(Object.keys(trees).map((name) => [name, []]));
try {
  for (let round = 0; round < rounds; round++) {
    const names = round % 2 === 0 ? Object.keys(trees) : Object.keys(trees).toReversed();
    for (const name of names) {
      const sample = await measure(grynya, trees[name] as string);
      samples[name]?.push(sample);
      console.log(
        `round ${round + 1} ${name}: main ${sample.main.toFixed(3)} runner ${sample.runner.toFixed(3)} other ${sample.other.toFixed(3)} grynya ${sample.grynya.toFixed(3)} ms/task`,
      );
    }
  }
} finally {
  await grynya.stop();
}
console.log(`\nCPU per task, median of ${rounds} rounds × ${tasks} tasks (ms):\n`);
console.log('| code | main thread | runner thread | other threads | Klym total | fake grynya |');
console.log('| --- | --- | --- | --- | --- | --- |');
for (const [name, list] of Object.entries(samples)) {
  const median = (pick: (sample: Sample) => number): number => summarize(list.map(pick)).median;
  const row = [median((s) => s.main), median((s) => s.runner), median((s) => s.other), median((s) => s.main + s.runner + s.other), median((s) => s.grynya)];
  console.log(`| ${name} | ${row.map((value) => value.toFixed(3)).join(' | ')} |`);
}
