// Scenario 8 (issue #13): Klym scaled out on Redis, as real processes — `klym serve` fronts with
// `tasks.concurrency: 0` and `klym worker`s, each on a real `redis-server` the benchmark starts; the fake
// grynya in its own process and the model on the fake OpenAI endpoint, in this one. Three parts:
// throughput with 1, 2 and 4 workers (bench/scale-out.ts), a task's CPU and its start to first tool result
// against embedded SQLite (bench/scale-out-cost.ts), and a dead worker's task taken over (bench/scale-out-takeover.ts).
import { startFakeLlmServer } from '../test/support/fake-llm-server.ts';
import { startRedisServer, type RedisServer } from '../test/support/redis-server.ts';
import { cpuMsOf, fakeModel, scriptedSteps, startKlymCli, startTask, taskOf, waitUntilIdle, type KlymCli } from './klym-cli.ts';
import { scaleOutCost } from './scale-out-cost.ts';
import { scaleOutTakeover } from './scale-out-takeover.ts';
import { startFakeGrynyaProcess, type ChildServer } from './servers.ts';
import { figure, ratio } from './stats.ts';

/** Tasks each worker runs at once, whatever the number of workers. */
const PER_WORKER = 4;
/** How long the model takes to answer, each step. */
const STEP_MS = 200;

/** One front and `workers` workers on a Redis of their own. */
interface Cluster {
  readonly workers: number;
  readonly front: KlymCli;
  /** CPU time of its Klym processes so far (front and workers), in milliseconds. */
  cpuMs(): number;
  close(): Promise<void>;
}

async function startCluster(workers: number, grynya: ChildServer, llmBaseUrl: string): Promise<Cluster> {
  const redis: RedisServer = await startRedisServer();
  const config = (concurrency: number) => ({
    upstreams: { grynya: { url: grynya.sseUrl, transport: 'sse', pool: { min: 1, max: PER_WORKER } } },
    llm: fakeModel(llmBaseUrl),
    tasks: { store: redis.url, concurrency, shutdownGraceMs: 0 },
    server: { port: 0 },
  });
  const processes: KlymCli[] = [];
  try {
    const started = await Promise.all([startKlymCli('serve', config(0)), ...Array.from({ length: workers }, () => startKlymCli('worker', config(PER_WORKER)))]);
    processes.push(...started);
  } catch (error) {
    await Promise.allSettled(processes.map((process) => process.stop()));
    await redis.close();
    throw error;
  }
  return {
    workers,
    front: processes[0] as KlymCli,
    cpuMs: () => processes.reduce((sum, process) => sum + cpuMsOf(process.pid), 0),
    async close() {
      await Promise.allSettled(processes.map((process) => process.stop()));
      await redis.close();
    },
  };
}

/** Starts `tasks` tasks at once on the cluster's front: seconds from the first start to the last task's end, and the CPU its processes spent meanwhile. */
async function batch(cluster: Cluster, tasks: number, label: string): Promise<{ seconds: number; cpuMs: number }> {
  const cpuBefore = cluster.cpuMs();
  const began = Date.now();
  const ids = await Promise.all(Array.from({ length: tasks }, (_, index) => startTask(cluster.front.url, `bench-task-${label}-${index}`)));
  await waitUntilIdle(cluster.front.url);
  const cpuMs = cluster.cpuMs() - cpuBefore;
  const views = await Promise.all(ids.map((id) => taskOf(cluster.front.url, id)));
  const failed = views.filter((view) => view.status !== 'completed');
  if (failed.length > 0) throw new Error(`${failed.length} of ${tasks} tasks did not complete: ${JSON.stringify(failed[0])}`);
  // The end is the store's own record of each task's end, not when a poll happened to see it.
  const last = Math.max(...views.map((view) => Date.parse(view.finished_at ?? '')));
  return { seconds: (last - began) / 1000, cpuMs };
}

/** Part 1: throughput with 1, 2 and 4 workers, the three clusters up side by side and measured in alternating order. */
async function throughput(grynya: ChildServer, options: { rounds: number; tasksPerWorker: number }): Promise<string[]> {
  // As many tasks per worker in every cluster: each batch keeps its workers' slots full for as many turns,
  // so what a batch costs to start and to finish weighs the same on 1 worker as on 4.
  const tasksOf = (workers: number): number => options.tasksPerWorker * workers;
  await using llm = await startFakeLlmServer(scriptedSteps({ delayMs: STEP_MS, toolSteps: 2 }));
  const clusters: Cluster[] = [];
  try {
    for (const workers of [1, 2, 4]) clusters.push(await startCluster(workers, grynya, llm.openaiBaseUrl));
    // Warm-up: every worker's code paths compiled and its sessions open.
    for (const cluster of clusters) await batch(cluster, cluster.workers * PER_WORKER, `warm-${cluster.workers}`);
    const batches = new Map<number, { seconds: number; cpuMs: number }[]>(clusters.map((cluster) => [cluster.workers, []]));
    for (let round = 0; round < options.rounds; round++) {
      for (const cluster of round % 2 === 0 ? clusters : clusters.toReversed()) {
        batches.get(cluster.workers)?.push(await batch(cluster, tasksOf(cluster.workers), `r${round}-${cluster.workers}`));
      }
    }
    const total = (workers: number, key: 'seconds' | 'cpuMs'): number => (batches.get(workers) ?? []).reduce((sum, measured) => sum + measured[key], 0);
    const rate = (workers: number): number => (tasksOf(workers) * options.rounds) / total(workers, 'seconds');
    const rows = [1, 2, 4].map((workers) => {
      const times = (batches.get(workers) ?? []).map((measured) => `${measured.seconds.toFixed(2)} s`).join(', ');
      const cpuPerTask = total(workers, 'cpuMs') / (tasksOf(workers) * options.rounds);
      const cores = total(workers, 'cpuMs') / 1000 / total(workers, 'seconds');
      return `| ${workers} | ${workers * PER_WORKER} | ${tasksOf(workers)} | ${times} | ${rate(workers).toFixed(2)} | ${ratio(rate(workers) / rate(1))} | ${cpuPerTask.toFixed(1)} ms | ${cores.toFixed(2)} |`;
    });
    const ideal = (options.tasksPerWorker / PER_WORKER) * 3 * STEP_MS;
    return [
      '| workers | tasks at once | tasks a batch | time per batch (rounds in order) | tasks/s | ÷ 1 worker | Klym CPU per task | cores busy (Klym) |',
      '| --- | --- | --- | --- | --- | --- | --- | --- |',
      ...rows,
      '',
      `Each task: three model answers of ${STEP_MS} ms each, two of them calling grynya's query_graph; ${PER_WORKER} tasks at a time per worker. ` +
        `A batch is ${options.tasksPerWorker} tasks per worker started at once on the front (\`klym serve\`, \`tasks.concurrency: 0\`), timed from the first start to the last task's \`finished_at\`; ` +
        `${options.rounds} round(s), the order of the three clusters alternating. A worker at full use would take ${(ideal / 1000).toFixed(1)} s a batch (the model's time alone). ` +
        `CPU is the front's and the workers' user + system time from /proc/<pid>/stat during the batches; cores busy is that CPU over the batches' time (the machine's cores also run the fake grynya, the model and the benchmark).`,
      '',
      figure('scale_tasks_per_s_1_worker', rate(1)),
      figure('scale_ratio_2_workers', rate(2) / rate(1)),
      figure('scale_ratio_4_workers', rate(4) / rate(1)),
    ];
  } finally {
    await Promise.allSettled(clusters.map((cluster) => cluster.close()));
  }
}

/** Scenario 8: every part, each with its own Redis, Klym processes and fakes. */
export async function scaleOut(options: { quick: boolean }): Promise<string[]> {
  const grynya = await startFakeGrynyaProcess();
  try {
    return [
      '### 8a. Throughput with 1, 2 and 4 workers\n',
      ...(await throughput(grynya, { rounds: options.quick ? 1 : 3, tasksPerWorker: options.quick ? 24 : 48 })),
      "\n### 8b. A task's CPU and its start to first tool result: Redis (a front and a worker) against embedded SQLite\n",
      ...(await scaleOutCost(grynya, { tasks: options.quick ? 30 : 150 })),
      '\n### 8c. A worker killed with SIGKILL: its task taken over by another\n',
      ...(await scaleOutTakeover({ quick: options.quick })),
    ];
  } finally {
    await grynya.stop();
  }
}
