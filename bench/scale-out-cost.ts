// Scenario 8b (issue #13): what a task costs on Redis — a front and one worker — against one `klym serve`
// on its embedded SQLite file: the CPU Klym's processes spend on it, and how long from the caller's start
// until its first tool result is logged. One task at a time, alternating between the two.
import { startFakeLlmServer } from '../test/support/fake-llm-server.ts';
import { startRedisServer } from '../test/support/redis-server.ts';
import { cpuMsOf, fakeModel, logOf, scriptedSteps, startKlymCli, startTask, waitUntilIdle, type KlymCli } from './klym-cli.ts';
import type { ChildServer } from './servers.ts';
import { figure, ratio, summarize } from './stats.ts';

type Mode = 'redis' | 'sqlite';

/** Log times are whole milliseconds. */
const ms = (value: number): string => `${value.toFixed(0)} ms`;

export async function scaleOutCost(grynya: ChildServer, options: { tasks: number }): Promise<string[]> {
  const answered = new Map<string, () => void>();
  await using llm = await startFakeLlmServer(scriptedSteps({ delayMs: 0, toolSteps: 2, onAnswer: (prompt) => answered.get(prompt)?.() }));
  const redis = await startRedisServer();
  const config = (store: string, concurrency: number) => ({
    upstreams: { grynya: { url: grynya.sseUrl, transport: 'sse', pool: { min: 1, max: 4 } } },
    llm: fakeModel(llm.openaiBaseUrl),
    tasks: { store, concurrency, shutdownGraceMs: 0 },
    server: { port: 0 },
  });
  const processes: KlymCli[] = [];
  const started = async (command: 'serve' | 'worker', store: string, concurrency: number): Promise<KlymCli> => {
    const klym = await startKlymCli(command, config(store, concurrency));
    processes.push(klym);
    return klym;
  };
  try {
    const [front, worker, embedded] = await Promise.all([
      started('serve', redis.url, 0),
      started('worker', redis.url, 4),
      started('serve', 'sqlite:tasks.db', 4),
    ]);
    const klym: Record<Mode, readonly KlymCli[]> = { redis: [front, worker], sqlite: [embedded] };
    const url: Record<Mode, string> = { redis: front.url, sqlite: embedded.url };
    const cpu = (mode: Mode): number => klym[mode].reduce((sum, process) => sum + cpuMsOf(process.pid), 0);
    const redisPid = redis.child().pid as number;

    let next = 0;
    /** One task, from its start until the model has given it its last answer (its end is then a store write away). */
    const run = async (mode: Mode): Promise<{ id: string; began: number }> => {
      const prompt = `bench-task-${mode}-${next++}`;
      const done = new Promise<void>((resolve) => answered.set(prompt, resolve));
      const began = Date.now();
      const id = await startTask(url[mode], prompt);
      await done;
      answered.delete(prompt);
      return { id, began };
    };
    for (let index = 0; index < 10; index++) for (const mode of ['redis', 'sqlite'] as const) await run(mode);
    for (const mode of ['redis', 'sqlite'] as const) await waitUntilIdle(url[mode]);

    const before = { redis: cpu('redis'), sqlite: cpu('sqlite'), server: cpuMsOf(redisPid) };
    const runs: Record<Mode, { id: string; began: number }[]> = { redis: [], sqlite: [] };
    for (let index = 0; index < options.tasks; index++) {
      for (const mode of index % 2 === 0 ? (['redis', 'sqlite'] as const) : (['sqlite', 'redis'] as const)) runs[mode].push(await run(mode));
    }
    for (const mode of ['redis', 'sqlite'] as const) await waitUntilIdle(url[mode]);
    const perTask = {
      redis: (cpu('redis') - before.redis) / options.tasks,
      sqlite: (cpu('sqlite') - before.sqlite) / options.tasks,
      server: (cpuMsOf(redisPid) - before.server) / options.tasks,
    };

    // Read after the CPU was: the logs' reads are not the tasks' cost.
    const firstTool = async (mode: Mode): Promise<number[]> =>
      Promise.all(
        runs[mode].map(async ({ id, began }) => {
          const result = (await logOf(url[mode], id)).find((entry) => entry.type === 'tool-result');
          if (result === undefined) throw new Error(`task ${id} (${mode}) logged no tool result`);
          return Date.parse(result.time) - began;
        }),
      );
    const latency = { redis: summarize(await firstTool('redis')), sqlite: summarize(await firstTool('sqlite')) };
    const row = (mode: Mode, label: string, extra: string) =>
      `| ${label} | ${perTask[mode].toFixed(1)} ms${extra} | ${ms(latency[mode].median)} | ${ms(latency[mode].p99)} |`;
    return [
      '| mode | Klym CPU per task | start → first tool result p50 | p99 |',
      '| --- | --- | --- | --- |',
      row('redis', 'Redis: `klym serve` front + 1 `klym worker`', ` (+ redis-server ${perTask.server.toFixed(1)} ms)`),
      row('sqlite', 'embedded SQLite: one `klym serve`', ''),
      '',
      `Redis ÷ SQLite: CPU per task ${ratio(perTask.redis / perTask.sqlite)} (Klym's processes only), first tool result ${ratio(latency.redis.median / latency.sqlite.median)} at p50, ` +
        `${ratio(latency.redis.p99 / latency.sqlite.p99)} at p99. ${options.tasks} tasks on each, one at a time, alternating; each task three model answers (no delay) and two query_graph calls. ` +
        `CPU is user + system time from /proc/<pid>/stat (10 ms ticks) of every Klym process of the mode over the whole run, idle time between its tasks included; ` +
        `the first tool result is the time of the task's first \`tool-result\` log entry less the moment the benchmark sent \`POST /api/tasks\` (both clocks this machine's, in whole ms).`,
      '',
      figure('redis_cpu_ratio', perTask.redis / perTask.sqlite),
      figure('redis_cpu_ms_per_task', perTask.redis, 1),
      figure('sqlite_cpu_ms_per_task', perTask.sqlite, 1),
      figure('redis_first_tool_ms_p50', latency.redis.median, 1),
      figure('redis_first_tool_ms_p99', latency.redis.p99, 1),
      figure('sqlite_first_tool_ms_p50', latency.sqlite.median, 1),
      figure('sqlite_first_tool_ms_p99', latency.sqlite.p99, 1),
    ];
  } finally {
    await Promise.allSettled(processes.map((process) => process.stop()));
    await redis.close();
  }
}
