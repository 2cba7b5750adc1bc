// Scenario 8c (issue #13): a worker killed with SIGKILL while its task waits on a tool call; how long until
// the task runs again on the other worker (its `task-resume` log entry), and until it ends. The fake grynya
// runs in this process, so that the call can be held open and seen arriving.
import { createFakeGrynya } from '@klym/fake-grynya';
import { startFakeLlmServer } from '../test/support/fake-llm-server.ts';
import { startRedisServer } from '../test/support/redis-server.ts';
import { fakeModel, logOf, scriptedSteps, startKlymCli, startTask, taskOf, type KlymCli } from './klym-cli.ts';
import { figure } from './stats.ts';

/** The queue's settings of one round; none given is the defaults (a 30 s lock, a stalled check every 30 s). */
interface Settings {
  readonly lockDurationMs?: number;
  readonly stalledIntervalMs?: number;
}

const until = async (check: () => Promise<boolean> | boolean, what: string, timeoutMs = 120_000): Promise<void> => {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
};

/** One round: a front and worker A; a task that A runs, held in its tool call; worker B; A killed. */
async function takeover(settings: Settings, round: number): Promise<{ ranMs: number; resumedMs: number; endedMs: number }> {
  await using grynya = await createFakeGrynya();
  await using llm = await startFakeLlmServer(scriptedSteps({ delayMs: 0, toolSteps: 1 }));
  const redis = await startRedisServer();
  const config = (concurrency: number) => ({
    upstreams: { grynya: { url: grynya.sseUrl, transport: 'sse' } },
    llm: fakeModel(llm.openaiBaseUrl),
    tasks: { store: redis.url, concurrency, shutdownGraceMs: 0, ...settings },
    server: { port: 0 },
  });
  const processes: KlymCli[] = [];
  const started = async (command: 'serve' | 'worker', concurrency: number): Promise<KlymCli> => {
    const klym = await startKlymCli(command, config(concurrency));
    processes.push(klym);
    return klym;
  };
  try {
    const [front, doomed] = await Promise.all([started('serve', 0), started('worker', 4)]);
    grynya.faults.hang = true;
    const id = await startTask(front.url, `bench-task-takeover-${round}`);
    // B starts only once A holds the task, so that the task is the one on the worker killed.
    await until(() => (grynya.stats.calls.query_graph ?? 0) === 1, 'the task to call query_graph on worker A');
    await started('worker', 4);
    const { started_at: startedAt } = await taskOf(front.url, id);
    const killedAt = Date.now();
    await doomed.kill();
    grynya.faults.hang = false;
    let resumedAt = Number.NaN;
    await until(async () => {
      const resume = (await logOf(front.url, id)).find((entry) => entry.type === 'task-resume');
      if (resume !== undefined) resumedAt = Date.parse(resume.time);
      return resume !== undefined;
    }, 'the task to resume on worker B');
    let endedAt = Number.NaN;
    await until(async () => {
      const view = await taskOf(front.url, id);
      if (view.finished_at !== undefined) endedAt = Date.parse(view.finished_at);
      if (view.finished_at !== undefined && view.status !== 'completed') throw new Error(`the task taken over ended as ${view.status}`);
      return view.finished_at !== undefined;
    }, 'the task to end on worker B');
    // The call A had sent has an unknown outcome: it must not have been sent again.
    if (grynya.stats.calls.query_graph !== 1)
      throw new Error(`grynya saw ${grynya.stats.calls.query_graph} query_graph calls for one task: a call was replayed`);
    return { ranMs: killedAt - Date.parse(startedAt ?? ''), resumedMs: resumedAt - killedAt, endedMs: endedAt - killedAt };
  } finally {
    await Promise.allSettled(processes.map((process) => process.stop()));
    await redis.close();
  }
}

const seconds = (value: number): string => `${(value / 1000).toFixed(2)} s`;

/** Short settings in `rounds` rounds, and, in a full run, one round on the defaults. */
export async function scaleOutTakeover(options: { quick: boolean }): Promise<string[]> {
  const short: Settings = { lockDurationMs: 2_000, stalledIntervalMs: 1_000 };
  const rows: string[] = [];
  const figures: string[] = [];
  const measure = async (settings: Settings, rounds: number, label: string, name: string): Promise<void> => {
    const times: { ranMs: number; resumedMs: number; endedMs: number }[] = [];
    for (let round = 0; round < rounds; round++) times.push(await takeover(settings, round));
    const column = (key: 'ranMs' | 'resumedMs' | 'endedMs'): string => times.map((time) => seconds(time[key])).join(', ');
    rows.push(`| ${label} | ${column('ranMs')} | ${column('resumedMs')} | ${column('endedMs')} |`);
    const resumed = times.map((time) => time.resumedMs).toSorted((a, b) => a - b);
    figures.push(figure(name, resumed[Math.floor(resumed.length / 2)] ?? Number.NaN, 0));
  };
  await measure(short, options.quick ? 1 : 3, '`lockDurationMs: 2000`, `stalledIntervalMs: 1000`', 'takeover_ms');
  if (!options.quick) await measure({}, 1, 'defaults: `lockDurationMs: 30000`, `stalledIntervalMs: 10000`', 'takeover_default_ms');
  return [
    '| queue settings | task started → SIGKILL | SIGKILL → task running on the other worker (`task-resume`) | SIGKILL → task completed |',
    '| --- | --- | --- | --- |',
    ...rows,
    '',
    'Two workers (one front); the task is held in a query_graph call on worker A; worker B is started then, and A is killed as soon as B is ready. B resumes the task from its checkpoint, ' +
      "and its model, told the call's outcome is unknown, answers. Times run from the kill to the timestamps worker B gave the `task-resume` entry and the task's end; " +
      'each round (listed in order) has a Redis and processes of its own.',
    '',
    ...figures,
  ];
}
