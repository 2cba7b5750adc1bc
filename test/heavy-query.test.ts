// Issue #31: SQL over a task's artifacts, as Grynya and its tasks meet it. A task's run queries what it kept;
// Grynya asks a finished task's evidence a new question over MCP (`query_task_artifact`) and REST
// (`POST /api/tasks/:id/query`), owner only, in a DuckDB that refuses files; reads the graph's answer back as
// the graph gave it; and a cancelled task interrupts the query it is running.
import { createSessionPool, createTaskManager, runAgent, type AgentRunner } from '@klym/core';
import { createScriptedModel } from '@klym/core/internal';
import { createRedisTaskStore } from '@klym/core/redis';
import { bigGraphFacts, createFakeGrynya } from '@klym/fake-grynya';
import { afterEach, describe, expect, it } from 'vitest';
import { startRedisServer } from './support/redis-server.ts';
import { payload, startHarness, waitForEnd, type ServerHarness } from './support/server-harness.ts';

const EVENTS = 5_000;
const QUERY = 'MATCH (e:Event) RETURN e';
const TOKENS = { grynya: 'the-token-of-grynya-123456', other: 'the-token-of-other-1234567' };
const facts = bigGraphFacts(EVENTS);

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).toReversed()) await cleanup();
});

/** A run that queries the graph, counts the answer's records by severity with SQL, and answers the CSV. */
const counter: AgentRunner = (options) =>
  runAgent({
    ...options,
    model: createScriptedModel({
      steps: ({ call, options: callOptions }) => {
        const seen = JSON.stringify(callOptions.prompt);
        if (call === 1) return { toolCalls: [{ toolName: 'grynya__query_graph', args: { query: QUERY } }] };
        const table = /Query it with SQL as table (art_[0-9a-f]{12})/.exec(seen)?.[1] ?? 'none';
        if (call === 2) return { toolCalls: [{ toolName: 'klym__query_artifact', args: { sql: `SELECT count(*) AS events FROM ${table}` } }] };
        return { text: /events\\n(\d+)/.exec(seen)?.[1] ?? 'no count' };
      },
    }),
  });

async function finishedTask(): Promise<{ harness: ServerHarness; taskId: string; artifact: string }> {
  const harness = await startHarness({ auth: { tokens: TOKENS }, tasks: { run: counter } });
  cleanups.push(() => harness.cleanup());
  harness.grynya.graph.loadEvents(EVENTS);
  const grynya = await harness.connect('streamable-http', TOKENS.grynya);
  const { task_id: taskId } = payload(await grynya.callTool({ name: 'start_async_agent_task', arguments: { prompt: 'How many events are there?' } })) as {
    task_id: string;
  };
  const status = await waitForEnd(grynya, taskId, 30_000);
  expect(status).toMatchObject({ status: 'completed', result: String(EVENTS) });
  const [artifact] = status.artifacts as { id: string; records?: { count: number; keys: string[] } }[];
  expect(artifact).toMatchObject({
    tool: 'grynya__query_graph',
    records: { count: EVENTS, first_line: 1, keys: expect.arrayContaining(['e.service', 'e.severity']) },
  });
  return { harness, taskId, artifact: artifact?.id as string };
}

describe("Grynya asks a finished task's artifacts new questions", () => {
  it('over MCP: query_task_artifact answers exact rows as CSV, bounded and saying what it left out, to the owner only, and refuses files', async () => {
    const { harness, taskId, artifact } = await finishedTask();
    const grynya = await harness.connect('streamable-http', TOKENS.grynya);
    const sql = `SELECT e.service AS service, count(*) AS errors FROM ${artifact} WHERE e.severity = 'error' GROUP BY ALL ORDER BY service`;
    const answer = payload(await grynya.callTool({ name: 'query_task_artifact', arguments: { task_id: taskId, sql } }));
    const expected = Object.entries(facts.errorsByService).toSorted(([a], [b]) => a.localeCompare(b));
    expect(answer).toMatchObject({ task_id: taskId, rows: 7, rows_shown: 7, columns: [{ name: 'service' }, { name: 'errors' }] });
    expect(answer.csv).toBe(['service,errors', ...expected.map(([service, errors]) => `${service},${errors}`)].join('\n'));
    expect(answer.note).toBeUndefined();

    // Every record back: more than an answer holds, and it says so and how to get the rest.
    const all = payload(
      await grynya.callTool({ name: 'query_task_artifact', arguments: { task_id: taskId, sql: `SELECT n, e.id FROM ${artifact} ORDER BY n` } }),
    );
    expect(all.rows).toBe(EVENTS);
    expect(all.rows_shown).toBeLessThan(EVENTS);
    expect(String(all.csv).split('\n')).toHaveLength(Number(all.rows_shown) + 1);
    expect(all.note).toBe(
      `${EVENTS - Number(all.rows_shown)} rows left out to keep this answer short: aggregate, or page with LIMIT ${all.rows_shown} OFFSET ${all.rows_shown}`,
    );

    const files = await grynya.callTool({ name: 'query_task_artifact', arguments: { task_id: taskId, sql: "SELECT * FROM read_csv('/etc/passwd')" } });
    expect(files).toMatchObject({
      isError: true,
      structuredContent: { error: { code: 'QUERY_FAILED', message: expect.stringContaining('disabled by configuration') } },
    });
    const typo = await grynya.callTool({ name: 'query_task_artifact', arguments: { task_id: taskId, sql: `SELEC 1 FROM ${artifact}` } });
    expect(typo).toMatchObject({ isError: true, structuredContent: { error: { code: 'QUERY_FAILED', message: expect.stringContaining('syntax error') } } });
    // The server is still there, and the same DuckDB answers.
    expect(
      payload(await grynya.callTool({ name: 'query_task_artifact', arguments: { task_id: taskId, sql: `SELECT count(*) AS n FROM ${artifact}` } })).csv,
    ).toBe(`n\n${EVENTS}`);

    // Another task of the same caller has tables of its own: this one's are not among them.
    const { task_id: second } = payload(await grynya.callTool({ name: 'start_async_agent_task', arguments: { prompt: 'How many events are there?' } })) as {
      task_id: string;
    };
    await waitForEnd(grynya, second, 30_000);
    const elsewhere = await grynya.callTool({ name: 'query_task_artifact', arguments: { task_id: second, sql: `SELECT count(*) FROM ${artifact}` } });
    expect(elsewhere).toMatchObject({
      isError: true,
      structuredContent: { error: { code: 'ARTIFACT_NOT_FOUND', message: expect.stringContaining(`This task has no artifact ${artifact}`) } },
    });

    const other = await harness.connect('streamable-http', TOKENS.other);
    const stranger = await other.callTool({ name: 'query_task_artifact', arguments: { task_id: taskId, sql: `SELECT count(*) FROM ${artifact}` } });
    expect(stranger).toMatchObject({ isError: true, structuredContent: { error: { code: 'TASK_NOT_FOUND' } } });
  });

  it('over REST: POST /api/tasks/:id/query, and the graph answer as it came, byte for byte', async () => {
    const { harness, taskId, artifact } = await finishedTask();
    const rest = (token: string, route: string, init: RequestInit = {}) =>
      fetch(`${harness.server.url}/api/tasks/${taskId}${route}`, {
        ...init,
        headers: { Authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      });
    const query = (token: string, body: string) => rest(token, '/query', { method: 'POST', body });
    const bySeverity = await query(
      TOKENS.grynya,
      JSON.stringify({ sql: `SELECT e.severity AS severity, count(*) AS events FROM ${artifact} GROUP BY ALL ORDER BY severity` }),
    );
    expect(bySeverity.status).toBe(200);
    const rows = String(((await bySeverity.json()) as { csv: string }).csv)
      .split('\n')
      .slice(1);
    expect(Object.fromEntries(rows.map((row) => [row.split(',')[0], Number(row.split(',')[1])]))).toEqual(facts.countsBySeverity);
    expect((await query(TOKENS.other, JSON.stringify({ sql: 'SELECT 1' }))).status).toBe(404);
    expect(await (await query(TOKENS.grynya, '{"sql":')).json()).toEqual({ error: { code: 'INVALID_ARGUMENT', message: '`body`: not valid JSON' } });
    expect((await query(TOKENS.grynya, JSON.stringify({ sql: 'SELECT 1', limit: 3 }))).status).toBe(400);
    const refused = await query(TOKENS.grynya, JSON.stringify({ sql: "COPY (SELECT 1) TO '/tmp/klym-escape.csv'" }));
    expect({ status: refused.status, body: await refused.json() }).toMatchObject({ status: 400, body: { error: { code: 'QUERY_FAILED' } } });

    const original = await rest(TOKENS.grynya, `/artifacts/${artifact}/original`);
    expect(original.headers.get('content-type')).toBe('application/json; charset=utf-8');
    const expected = `{"status": "success", "results": ${harness.grynya.graph.queryJson(QUERY)}}`;
    expect((await original.text()) === expected).toBe(true);
    expect((await rest(TOKENS.other, `/artifacts/${artifact}/original`)).status).toBe(404);

    // The same, paged over MCP for a caller that wants it in its context: every character once.
    const grynya = await harness.connect('streamable-http', TOKENS.grynya);
    let text = '';
    let offset: number | undefined = 0;
    while (offset !== undefined) {
      const page = payload(await grynya.callTool({ name: 'read_task_artifact', arguments: { task_id: taskId, artifact, original: true, offset } })) as {
        text: string;
        next_offset?: number;
      };
      text += page.text;
      offset = page.next_offset;
    }
    expect(text === expected).toBe(true);
  });
});

describe('a task kept in Redis', () => {
  it('has its artifacts loaded from Redis into the DuckDB of the process that runs it, and again for a follow-up', async () => {
    const redis = await startRedisServer();
    cleanups.push(() => redis.stop());
    const grynya = await createFakeGrynya({ bigGraph: { events: EVENTS } });
    cleanups.push(() => grynya.close());
    const pool = await createSessionPool({ upstreams: { grynya: { url: grynya.sseUrl, transport: 'sse' } } });
    cleanups.push(() => pool.close({ drainTimeoutMs: 100 }));
    const me = { principal: 'grynya' };
    const worker = createTaskManager({ pool, run: counter, store: await createRedisTaskStore({ url: redis.url, prefix: 'w1' }) });
    cleanups.push(() => worker.close({ graceMs: 0 }));
    const task = await worker.start({ prompt: 'How many events are there?' }, me);
    await expect.poll(async () => (await worker.get(task.id, me)).status, { timeout: 20_000 }).toBe('completed');
    expect((await worker.get(task.id, me)).result?.text).toBe(String(EVENTS));

    // Another process on the same Redis (a front) answers a follow-up from the artifact Redis keeps.
    const front = createTaskManager({ pool, run: counter, maxConcurrent: 1, store: await createRedisTaskStore({ url: redis.url, prefix: 'w1' }) });
    cleanups.push(() => front.close({ graceMs: 0 }));
    const [artifact] = (await front.read(task.id, me, { tail: 1 })).artifacts;
    const answer = await front.queryArtifacts(task.id, me, `SELECT count(*) FILTER (WHERE e.severity = 'error') AS errors FROM ${artifact?.id}`);
    expect(answer.rows).toEqual([[Object.values(facts.errorsByService).reduce((sum, count) => sum + count, 0)]]);
  });
});

describe('a cancelled task', () => {
  it('interrupts the query its run is waiting for, and its run ends', async () => {
    const pool = await createSessionPool({ upstreams: {} });
    cleanups.push(() => pool.close({ drainTimeoutMs: 100 }));
    let asked = false;
    const run: AgentRunner = (options) =>
      runAgent({
        ...options,
        model: createScriptedModel({
          steps: ({ call }) => {
            if (call > 1) return { text: 'the query answered' };
            asked = true;
            // Minutes of work for DuckDB, and no table: it stops only when interrupted.
            return { toolCalls: [{ toolName: 'klym__query_artifact', args: { sql: 'SELECT count(*) FROM range(100000000000) a WHERE a.range % 7 = 3' } }] };
          },
        }),
      });
    const tasks = createTaskManager({ pool, run, artifactQuery: { timeoutMs: 600_000 } });
    cleanups.push(() => tasks.close({ graceMs: 0 }));
    const me = { principal: 'grynya' };
    const task = await tasks.start({ prompt: 'count forever' }, me);
    await expect.poll(async () => asked && (await tasks.get(task.id, me)).currentStep?.includes('calling klym__query_artifact')).toBe(true);
    await tasks.cancel(task.id, me);
    // The run ends: the query was interrupted, not left to run for its ten minutes.
    await expect
      .poll(async () => (await tasks.logs(task.id, me, { limit: 500 })).entries.some((entry) => entry.type === 'run-end'), { timeout: 10_000 })
      .toBe(true);
    const end = (await tasks.logs(task.id, me, { limit: 500 })).entries.find((entry) => entry.type === 'run-end');
    expect(end?.data).toMatchObject({ finishReason: 'cancelled' });
    expect((await tasks.get(task.id, me)).status).toBe('cancelled');
  });
});
