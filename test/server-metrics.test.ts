// Issue #15, part 2: `GET /metrics` of a real server (and of a worker's health port), scraped after tasks
// ran on the runner thread over the fake grynya with the scripted model. Issue #33, part 3: each configured
// principal's tasks, spend and refusals, every other principal (an OAuth subject here) summed as `other`.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startKlymServer, startKlymWorker } from '../apps/server/src/server/index.ts';
import { gatedRunner } from './support/dashboard.ts';
import { startOidcIssuer } from './support/oidc-issuer.ts';
import { scrape, valueOf, type Sample } from './support/prometheus.ts';
import { startRedisServer, type RedisServer } from './support/redis-server.ts';
import { startHarness, type ServerHarness } from './support/server-harness.ts';
import { createFakeGrynya } from '@klym/fake-grynya';

const TOKEN = 'api-token-0123456789abcdef';
const METRICS_TOKEN = 'metrics-token-0123456789abcdef';

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).toReversed()) await cleanup();
});

async function harness(options: Parameters<typeof startHarness>[0]): Promise<ServerHarness> {
  const started = await startHarness(options);
  cleanups.push(() => started.cleanup());
  return started;
}

/** Starts a task over REST and waits for its end; its id. */
async function runTask(url: string, token: string): Promise<string> {
  const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
  const started = (await (await fetch(`${url}/api/tasks`, { method: 'POST', headers, body: JSON.stringify({ prompt: 'Self-check, please' }) })).json()) as {
    task_id: string;
  };
  await expect
    .poll(async () => ((await (await fetch(`${url}/api/tasks/${started.task_id}`, { headers })).json()) as { status: string }).status, { timeout: 15_000 })
    .toBe('completed');
  return started.task_id;
}

/** Starts a task over REST with `token`; the answer as it came. */
const start = (url: string, token: string, prompt: string): Promise<Response> =>
  fetch(`${url}/api/tasks`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ prompt }),
  });

/** The error code of a refused start, with its status. */
const refusal = async (response: Response): Promise<{ status: number; code?: string }> => ({
  status: response.status,
  code: ((await response.json()) as { error?: { code: string } }).error?.code,
});

/** Every label value of the samples named `name`, by label. */
const labelValues = (samples: readonly Sample[], name: string, label: string): string[] =>
  [...new Set(samples.filter((sample) => sample.name === name).map((sample) => sample.labels[label] as string))].toSorted();

describe("the dashboard's upstreams page", () => {
  it("counts the calls that tasks made on the runner thread, whose pool is not the page's", async () => {
    const { server } = await harness({ tasks: { runner: 'thread' } });
    await runTask(server.url, 'no-token-needed-on-loopback');
    await runTask(server.url, 'no-token-needed-on-loopback');
    const page = await (await fetch(`${server.url}/dashboard/parts/upstreams`)).text();
    const row = /<tr data-upstream="grynya">([\s\S]*?)<\/tr>/.exec(page)?.[1] ?? '';
    const cells = [...row.matchAll(/<td class="num">([^<]*)<\/td>/g)].map((match) => match[1]);
    // Calls ok: the two self-check probes, each one query_graph on the thread's pool.
    expect(cells[3]).toBe('2');
    expect(cells[6]).toMatch(/\d+(\.\d)? (ms|s)$/);
    expect(page).toContain('its runner thread’s included');
  });
});

describe('GET /metrics', () => {
  it('counts tasks, upstream calls made on the runner thread, tokens and cost, with bounded labels, and process metrics', async () => {
    const { server } = await harness({ auth: { tokens: { 'principal-of-grynya': TOKEN } }, tasks: { runner: 'thread' } });
    const ids = [await runTask(server.url, TOKEN), await runTask(server.url, TOKEN)];
    // A call by a name the upstream never listed: its label must not be whatever a caller wrote.
    await server.klym.service.pool.callTool('grynya', 'made_up_tool_for_metrics').catch(() => {});

    const cpuBeforeScrape = process.cpuUsage();
    const samples = await scrape(`${server.url}/metrics`, TOKEN);

    expect(valueOf(samples, 'klym_tasks', { status: 'completed' })).toBe(2);
    expect(valueOf(samples, 'klym_tasks', { status: 'running' })).toBe(0);
    expect(valueOf(samples, 'klym_queue_depth')).toBe(0);
    expect(valueOf(samples, 'klym_tasks_started_total')).toBe(2);
    expect(valueOf(samples, 'klym_task_duration_seconds_count', { status: 'completed' })).toBe(2);
    // The self-check's one query_graph per task ran on the runner thread's pool.
    expect(valueOf(samples, 'klym_upstream_calls_total', { upstream: 'grynya', tool: 'query_graph', outcome: 'ok' })).toBe(2);
    expect(valueOf(samples, 'klym_upstream_call_duration_seconds_count', { upstream: 'grynya', tool: 'query_graph', outcome: 'ok' })).toBe(2);
    expect(valueOf(samples, 'klym_upstream_calls_total', { upstream: 'grynya', tool: 'other' })).toBe(1);
    expect(valueOf(samples, 'klym_upstream_state', { upstream: 'grynya', state: 'ready' })).toBe(1);
    expect(valueOf(samples, 'klym_upstream_state', { upstream: 'grynya', state: 'down' })).toBe(0);
    expect(valueOf(samples, 'klym_llm_tokens_total', { model: 'scripted', kind: 'input' })).toBeGreaterThan(0);
    expect(valueOf(samples, 'klym_llm_tokens_total', { model: 'scripted', kind: 'output' })).toBeGreaterThan(0);
    expect(valueOf(samples, 'klym_llm_cost_usd_total', { model: 'scripted' })).toBe(0);
    // The server runs in this process: its CPU counters are totals since the process started, not since the first scrape.
    expect(valueOf(samples, 'process_cpu_user_seconds_total')).toBeGreaterThanOrEqual(cpuBeforeScrape.user / 1e6);
    expect(valueOf(samples, 'process_cpu_seconds_total')).toBeGreaterThanOrEqual((cpuBeforeScrape.user + cpuBeforeScrape.system) / 1e6);
    expect(valueOf(samples, 'nodejs_eventloop_lag_seconds')).toBeDefined();

    // Bounded labels: fixed sets, the configured upstream, model and principal, listed tools; never a task id or prompt.
    expect(labelValues(samples, 'klym_tasks', 'status')).toEqual(['cancelled', 'completed', 'error', 'input_required', 'pending', 'running']);
    expect(labelValues(samples, 'klym_upstream_calls_total', 'tool')).toEqual(['other', 'query_graph']);
    expect(labelValues(samples, 'klym_upstream_state', 'state')).toEqual(['closed', 'connecting', 'down', 'ready']);
    expect(labelValues(samples, 'klym_llm_tokens_total', 'model')).toEqual(['scripted']);
    expect(labelValues(samples, 'klym_principal_tasks', 'principal')).toEqual(['other', 'principal-of-grynya']);
    const body = JSON.stringify(samples);
    for (const secretish of [...ids, 'made_up_tool_for_metrics', 'Self-check', TOKEN]) expect(body).not.toContain(secretish);
  });

  it('is guarded like the API, or by metrics.token alone', async () => {
    const { server } = await harness({ auth: { tokens: { grynya: TOKEN } } });
    expect((await fetch(`${server.url}/metrics`)).status).toBe(401);
    expect((await fetch(`${server.url}/metrics`, { headers: { authorization: 'Bearer not-a-token-at-all' } })).status).toBe(401);
    expect(await scrape(`${server.url}/metrics`, TOKEN)).toContainEqual(expect.objectContaining({ name: 'klym_queue_depth' }));

    const separate = (await harness({ auth: { tokens: { grynya: TOKEN } }, metrics: { token: METRICS_TOKEN } })).server;
    const refused = await fetch(`${separate.url}/metrics`);
    expect(refused.status).toBe(401);
    expect(refused.headers.get('www-authenticate')).toBe('Bearer realm="klym"');
    // An API token is a client's, not a scraper's.
    expect((await fetch(`${separate.url}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } })).status).toBe(401);
    expect(await scrape(`${separate.url}/metrics`, METRICS_TOKEN)).toContainEqual(expect.objectContaining({ name: 'klym_queue_depth' }));
    // …and the metrics token opens nothing else.
    expect((await fetch(`${separate.url}/api/tasks`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } })).status).toBe(401);
  });
});

describe('GET /metrics per principal', () => {
  const TOKENS = { alice: 'alice-token-0123456789abcdef', bob: 'bob-token-0123456789abcdef' };
  const RESOURCE = 'https://klym.example/mcp';

  it("gauges each configured principal's waiting and running tasks, spend today and limits, sums the others as one series, and counts refusals by quota", async () => {
    const issuer = await startOidcIssuer();
    cleanups.push(() => issuer.close());
    // Each task spends its first step (850 tokens in, 40 out: $1.05 at these prices), then waits until the server closes.
    const runner = gatedRunner();
    const { server } = await harness({
      auth: { tokens: TOKENS, oauth: { issuer: issuer.issuer, resource: RESOURCE } },
      tasks: {
        run: runner.run,
        maxConcurrent: 4,
        maxQueued: 2,
        prices: { 'scripted:script': { inputPerMillion: 1_000, outputPerMillion: 5_000 } },
        perPrincipal: { maxRunning: 1, maxQueued: 1, overrides: { batch: { maxRunning: 4, maxQueued: 50 } } },
      },
    });
    // An OAuth subject: a principal of no configured name.
    const carol = await issuer.sign({ aud: RESOURCE, sub: 'carol-of-oauth', scope: 'klym:start klym:read klym:cancel' });

    for (const [token, prompt] of [
      [TOKENS.alice, 'alice 1'],
      [TOKENS.alice, 'alice 2'],
      [TOKENS.bob, 'bob 1'],
      [carol, 'carol 1'],
      [carol, 'carol 2'],
    ] as const) {
      expect((await start(server.url, token, prompt)).status).toBe(202);
    }
    expect(await refusal(await start(server.url, TOKENS.alice, 'alice 3'))).toEqual({ status: 429, code: 'QUOTA_EXCEEDED' });
    expect(await refusal(await start(server.url, carol, 'carol 3'))).toEqual({ status: 429, code: 'QUOTA_EXCEEDED' });
    // Bob is under his own quota, but the queue holds its 2 (alice's second and carol's).
    expect(await refusal(await start(server.url, TOKENS.bob, 'bob 2'))).toEqual({ status: 429, code: 'TASK_QUEUE_FULL' });

    // Once the three running tasks' first steps are counted in the store.
    let samples: Sample[] = [];
    await expect
      .poll(
        async () => {
          samples = await scrape(`${server.url}/metrics`, TOKENS.alice);
          return [
            valueOf(samples, 'klym_principal_llm_tokens_today', { principal: 'alice' }),
            valueOf(samples, 'klym_principal_llm_tokens_today', { principal: 'bob' }),
          ];
        },
        { timeout: 15_000 },
      )
      .toEqual([890, 890]);

    const tasksOf = (principal: string) => ({
      pending: valueOf(samples, 'klym_principal_tasks', { principal, status: 'pending' }),
      running: valueOf(samples, 'klym_principal_tasks', { principal, status: 'running' }),
    });
    expect(tasksOf('alice')).toEqual({ pending: 1, running: 1 });
    expect(tasksOf('bob')).toEqual({ pending: 0, running: 1 });
    // A configured principal that started nothing still has its series.
    expect(tasksOf('batch')).toEqual({ pending: 0, running: 0 });
    expect(tasksOf('other')).toEqual({ pending: 1, running: 1 });
    // The principals' series add up to the store's totals.
    expect(valueOf(samples, 'klym_tasks', { status: 'running' })).toBe(3);
    expect(valueOf(samples, 'klym_queue_depth')).toBe(2);

    expect(valueOf(samples, 'klym_principal_llm_cost_usd_today', { principal: 'alice' })).toBeCloseTo(1.05, 6);
    expect(valueOf(samples, 'klym_principal_llm_cost_usd_today', { principal: 'batch' })).toBe(0);
    expect(valueOf(samples, 'klym_principal_limit', { principal: 'alice', quota: 'maxQueued' })).toBe(1);
    expect(valueOf(samples, 'klym_principal_limit', { principal: 'batch', quota: 'maxQueued' })).toBe(50);
    expect(valueOf(samples, 'klym_principal_limit', { principal: 'alice', quota: 'maxTokensPerDay' })).toBeUndefined();

    expect(valueOf(samples, 'klym_task_refusals_total', { principal: 'alice', quota: 'maxQueued' })).toBe(1);
    expect(valueOf(samples, 'klym_task_refusals_total', { principal: 'other', quota: 'maxQueued' })).toBe(1);
    expect(valueOf(samples, 'klym_task_refusals_total', { principal: 'bob', quota: 'tasks.maxQueued' })).toBe(1);
    expect(valueOf(samples, 'klym_task_refusals_total', { principal: 'bob', quota: 'maxQueued' })).toBeUndefined();

    // Bounded: the configured names and `other`; an OAuth subject is never a label.
    expect(labelValues(samples, 'klym_principal_tasks', 'principal')).toEqual(['alice', 'batch', 'bob', 'other']);
    expect(labelValues(samples, 'klym_task_refusals_total', 'principal')).toEqual(['alice', 'bob', 'other']);
    expect(labelValues(samples, 'klym_principal_llm_tokens_today', 'principal')).toEqual(['alice', 'batch', 'bob']);
    expect(JSON.stringify(samples)).not.toContain('carol-of-oauth');
  });
});

describe("a worker's health port", () => {
  let redis: RedisServer;
  beforeAll(async () => {
    redis = await startRedisServer();
  });
  afterAll(async () => {
    await redis.close();
  });

  it('exposes the same metrics, counting the runs it made; the front that heard of them does not count them again', async () => {
    const grynya = await createFakeGrynya();
    cleanups.push(() => grynya.close());
    const options = {
      port: 0,
      upstreams: { grynya: { url: grynya.sseUrl, transport: 'sse' as const } },
      auth: { tokens: { grynya: TOKEN } },
      metrics: { token: METRICS_TOKEN },
      log: () => {},
    };
    const tasks = { store: redis.url, shutdownGraceMs: 0 };
    const front = await startKlymServer({ ...options, tasks: { ...tasks, maxConcurrent: 0 } });
    cleanups.push(() => front.close());
    const worker = await startKlymWorker({ ...options, tasks: { ...tasks, maxConcurrent: 1, runner: 'thread' } });
    cleanups.push(() => worker.close());

    await runTask(front.url, TOKEN);

    expect((await fetch(`${worker.url}/metrics`)).status).toBe(401);
    const [onWorker, onFront] = await Promise.all([scrape(`${worker.url}/metrics`, METRICS_TOKEN), scrape(`${front.url}/metrics`, METRICS_TOKEN)]);
    expect(valueOf(onWorker, 'klym_tasks_started_total')).toBe(1);
    expect(valueOf(onWorker, 'klym_task_duration_seconds_count', { status: 'completed' })).toBe(1);
    expect(valueOf(onWorker, 'klym_upstream_calls_total', { upstream: 'grynya', tool: 'query_graph', outcome: 'ok' })).toBe(1);
    expect(valueOf(onWorker, 'klym_llm_tokens_total', { model: 'scripted', kind: 'input' })).toBeGreaterThan(0);
    expect(valueOf(onWorker, 'klym_tasks', { status: 'completed' })).toBe(1);
    expect(valueOf(onFront, 'klym_tasks_started_total')).toBe(0);
    expect(valueOf(onFront, 'klym_task_duration_seconds_count', { status: 'completed' })).toBeUndefined();
    // The store is shared: every process reports the same task counts, and the same spend of each principal.
    expect(valueOf(onFront, 'klym_tasks', { status: 'completed' })).toBe(1);
    const spent = valueOf(onWorker, 'klym_principal_llm_tokens_today', { principal: 'grynya' });
    expect(spent).toBeGreaterThan(0);
    expect(valueOf(onFront, 'klym_principal_llm_tokens_today', { principal: 'grynya' })).toBe(spent);
    for (const samples of [onWorker, onFront]) expect(valueOf(samples, 'klym_principal_tasks', { principal: 'grynya', status: 'running' })).toBe(0);
  });
});
