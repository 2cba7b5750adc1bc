// Scenario 11 (issue #33): fair turns between principals, measured from outside as a caller sees them. Alice
// starts a batch of 40 tasks on 2 slots, then a newcomer starts one: how long the newcomer's task waits to start,
// over how long one task runs. The newcomer is bob (another principal: fair turns) or alice herself (her 41st: the
// place arrival order, FIFO, gives any newcomer; Klym has no switch to turn fair turns off). Real processes over
// REST: `klym serve` on its SQLite store (a user's default), and a front with two `klym worker`s on Redis.
import { restCall } from '../test/cli-harness.ts';
import { startRedisServer, type RedisServer } from '../test/support/redis-server.ts';
import { startKlymCli, type KlymCli } from './klym-cli.ts';
import { startFakeGrynyaProcess, type ChildServer } from './servers.ts';
import { figure, summarize } from './stats.ts';

const ALICE = 'token-of-alice-bench-0123456789';
const BOB = 'token-of-bob-bench-0123456789ab';
/** Alice's batch, as in the issue. */
const BATCH = 40;
/** How long grynya takes to answer the self-check's `query_graph`: most of a task's run. */
const PROBE_MS = 200;

type Newcomer = 'bob' | 'alice';
const tokenOf: Record<Newcomer, string> = { bob: BOB, alice: ALICE };

/** A Klym set-up with two slots in all, its REST front, and what to stop. */
interface Setup {
  readonly label: string;
  readonly url: string;
  close(): Promise<void>;
}

interface TaskView {
  readonly status: string;
  readonly created_at: string;
  readonly started_at?: string;
  readonly finished_at?: string;
}

/** One round: the newcomer's wait (created → started), the batch's median run, how many of the batch started first. */
interface Round {
  readonly waitMs: number;
  readonly runMs: number;
  readonly batchAhead: number;
}

const api = async (url: string, route: string, token: string, body?: unknown): Promise<Record<string, unknown>> => {
  const { status, json } = await restCall(url, route, token, body);
  if (status >= 300) throw new Error(`${route} answered ${status}: ${JSON.stringify(json)}`);
  return json;
};
const start = async (url: string, token: string, prompt: string): Promise<string> => String((await api(url, '/api/tasks', token, { prompt })).task_id);
const view = async (url: string, token: string, id: string): Promise<TaskView> => (await api(url, `/api/tasks/${id}`, token)) as unknown as TaskView;
const pause = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
const at = (iso: string | undefined): number => Date.parse(iso ?? '');

/** Waits until `/healthz` at `url` says `ok` (grynya's tools listed, which the self-check needs for its probe). */
async function healthy(url: string, token?: string): Promise<void> {
  for (let tries = 0; ; tries++) {
    const headers: Record<string, string> = token === undefined ? {} : { authorization: `Bearer ${token}` };
    const response = await fetch(`${url}/healthz`, { headers });
    if (((await response.json()) as { status?: string }).status === 'ok') return;
    if (tries > 200) throw new Error(`${url}/healthz did not say ok within 20 s`);
    await pause(100);
  }
}

/** Waits until every task in `ids` has ended, and answers their views; a task that did not complete fails the run. */
async function ended(url: string, token: string, ids: readonly string[]): Promise<TaskView[]> {
  for (;;) {
    const views = await Promise.all(ids.map((id) => view(url, token, id)));
    if (views.every((task) => !['pending', 'running'].includes(task.status))) {
      const failed = views.find((task) => task.status !== 'completed');
      if (failed !== undefined) throw new Error(`a task did not complete: ${JSON.stringify(failed)}`);
      return views;
    }
    await pause(100);
  }
}

/** One round: alice's batch started one request after another, then the newcomer's one task; all run to the end. */
async function round(url: string, newcomer: Newcomer, label: string): Promise<Round> {
  const batch: string[] = [];
  for (let index = 0; index < BATCH; index++) batch.push(await start(url, ALICE, `batch ${label} ${index}`));
  const token = tokenOf[newcomer];
  const mine = await start(url, token, `newcomer ${label}`);
  const [hers, [his]] = await Promise.all([ended(url, ALICE, batch), ended(url, token, [mine])]);
  const started = at(his?.started_at);
  return {
    waitMs: started - at(his?.created_at),
    runMs: summarize(hers.map((task) => at(task.finished_at) - at(task.started_at))).median,
    batchAhead: hers.filter((task) => at(task.started_at) <= started).length,
  };
}

/** `klym serve` on `sqlite:tasks.db` in its directory, two tasks at once. */
async function embedded(grynya: ChildServer): Promise<Setup> {
  const serve = await startKlymCli('serve', {
    upstreams: { grynya: { url: grynya.sseUrl, transport: 'sse' } },
    tasks: { store: 'sqlite:tasks.db', concurrency: 2, shutdownGraceMs: 0 },
    server: { port: 0, tokens: { alice: ALICE, bob: BOB } },
  });
  await healthy(serve.url, ALICE);
  return { label: 'SQLite: one `klym serve`, `tasks.concurrency: 2`', url: serve.url, close: () => serve.stop() };
}

/** A front and two workers of one task at a time on a Redis of their own. */
async function scaledOut(grynya: ChildServer): Promise<Setup> {
  const redis: RedisServer = await startRedisServer();
  const config = (concurrency: number) => ({
    upstreams: { grynya: { url: grynya.sseUrl, transport: 'sse' } },
    tasks: { store: redis.url, concurrency, shutdownGraceMs: 0 },
    server: { port: 0, tokens: { alice: ALICE, bob: BOB } },
  });
  const processes: KlymCli[] = [];
  const close = async (): Promise<void> => {
    await Promise.allSettled(processes.map((process) => process.stop()));
    await redis.close();
  };
  try {
    const started = await Promise.allSettled([startKlymCli('serve', config(0)), startKlymCli('worker', config(1)), startKlymCli('worker', config(1))]);
    for (const outcome of started) if (outcome.status === 'fulfilled') processes.push(outcome.value);
    const failed = started.find((outcome) => outcome.status === 'rejected');
    if (failed !== undefined) throw failed.reason;
    const [front, ...workers] = processes as [KlymCli, ...KlymCli[]];
    await Promise.all([healthy(front.url, ALICE), ...workers.map((worker) => healthy(worker.url))]);
    const label = 'Redis: a `klym serve` front + 2 `klym worker`s, `tasks.concurrency: 1` each';
    return { label, url: front.url, close };
  } catch (error) {
    await close();
    throw error;
  }
}

/** Rounds on one set-up, fair and FIFO alternating which goes first, after a warm-up of each. */
async function measure(setup: Setup, rounds: number): Promise<Record<Newcomer, Round[]>> {
  for (const newcomer of ['bob', 'alice'] as const) {
    const warm = await Promise.all([1, 2, 3, 4].map((index) => start(setup.url, tokenOf[newcomer], `warm-up ${index}`)));
    await ended(setup.url, tokenOf[newcomer], warm);
  }
  const results: Record<Newcomer, Round[]> = { bob: [], alice: [] };
  for (let index = 0; index < rounds; index++) {
    const order: Newcomer[] = index % 2 === 0 ? ['bob', 'alice'] : ['alice', 'bob'];
    for (const newcomer of order) results[newcomer].push(await round(setup.url, newcomer, `r${index}-${newcomer}`));
  }
  return results;
}

/** Scenario 11: each set-up in turn, its rounds side by side. */
export async function fairness(options: { quick: boolean }): Promise<string[]> {
  const rounds = options.quick ? 2 : 5;
  const grynya = await startFakeGrynyaProcess({ delayMs: PROBE_MS });
  const rows: string[] = [];
  const figures: string[] = [];
  try {
    for (const [key, open] of [
      ['', embedded],
      ['_redis', scaledOut],
    ] as const) {
      const setup = await open(grynya);
      try {
        const results = await measure(setup, rounds);
        const ratios: Record<Newcomer, number> = { bob: 0, alice: 0 };
        for (const newcomer of ['bob', 'alice'] as const) {
          const measured = results[newcomer];
          const wait = summarize(measured.map((one) => one.waitMs)).median;
          const run = summarize(measured.map((one) => one.runMs)).median;
          ratios[newcomer] = wait / run;
          const who = newcomer === 'bob' ? "bob's first (fair turns)" : "alice's 41st (FIFO: any newcomer's place in arrival order)";
          const waits = measured.map((one) => `${(one.waitMs / 1000).toFixed(2)} s`).join(', ');
          const ahead = measured.map((one) => one.batchAhead).join(', ');
          rows.push(`| ${setup.label} | ${who} | ${waits} | ${run.toFixed(0)} ms | ${ratios[newcomer].toFixed(2)} | ${ahead} |`);
        }
        figures.push(figure(`fair_wait_ratio${key}`, ratios.bob), figure(`fifo_wait_ratio${key}`, ratios.alice));
      } finally {
        await setup.close();
      }
    }
  } finally {
    await grynya.stop();
  }
  return [
    "| set-up (2 slots in all) | the newcomer's task | its wait, created → started (rounds in order) | one run, median " +
      "| wait ÷ run (median wait) | alice's tasks started before it |",
    '| --- | --- | --- | --- | --- | --- |',
    ...rows,
    '',
    `Alice starts ${BATCH} tasks one request after another, then the newcomer starts one; each task is the scripted ` +
      `model's self-check, whose one \`query_graph\` call grynya (its own process) answers after ${PROBE_MS} ms. ` +
      "The wait is the newcomer's `started_at` less its `created_at` (the store's own times), one run the median " +
      "`finished_at` − `started_at` of the round's batch. Klym has no switch to turn fair turns off, so the FIFO row is " +
      "the newcomer under alice's principal: behind all of her tasks, as arrival order puts every newcomer. " +
      `${rounds} round(s) each, after a warm-up; wait ÷ run is the median wait over the median run (of an even count, the upper); ` +
      'the fair and FIFO rounds alternate which goes first, and every round runs to its end before the next.',
    '',
    ...figures,
  ];
}
