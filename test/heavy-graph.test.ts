// Issue #31: deep diagnosis of the graph. grynya-mcp-server answers `MATCH (e:Event) RETURN e` with 120,000 rows
// on one line (21 MB of Python's json.dumps); the fake grynya answers exactly so, over legacy SSE. A task run by the
// real @ai-sdk/openai provider against a local fake of the OpenAI API that refuses a request past its window (counted
// with o200k) must answer both questions exactly: a needle found by grep among the records, and an aggregate that
// klym__query_artifact computes in DuckDB, on the runner thread and inline, over the SQLite store. Grynya then asks
// a follow-up question of the finished task's artifact, and reads the graph's answer back byte for byte.
import path from 'node:path';
import { createSessionPool, createTaskManager, type TaskManager, type TaskRecord } from '@klym/core';
import { createThreadRunner } from '@klym/core/engine';
import { createSqliteTaskStore } from '@klym/core/sqlite';
import { bigGraphFacts, createFakeGrynya, eventRow, type FakeGrynya } from '@klym/fake-grynya';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { temporaryDirectory } from './cli-harness.ts';
import { startFakeLlmServer, type FakeReply, type FakeRequest } from './support/fake-llm-server.ts';

const me = { principal: 'grynya' };
const EVENTS = 120_000;
const WINDOW = 128_000;
const KEY = 'sk-test-key-for-the-fake-0123456789';
const facts = bigGraphFacts(EVENTS);
// A needle far into the answer: past anything a cut at the first characters of the line could show.
const NEEDLE = eventRow(98_765);
const QUERY = 'MATCH (e:Event) RETURN e';

/** Every string in a request's JSON: the tool results the model was given among them, unescaped. */
function stringsOf(value: unknown, into: string[] = []): string[] {
  if (typeof value === 'string') into.push(value);
  else if (Array.isArray(value)) for (const item of value) stringsOf(item, into);
  else if (typeof value === 'object' && value !== null) for (const item of Object.values(value)) stringsOf(item, into);
  return into;
}

/**
 * The fake model, playing an agent that investigates the graph: it queries it, reads the reference it is given,
 * and then greps the records for the trace, or counts with SQL, deciding from what its request holds.
 */
function investigator(request: FakeRequest): FakeReply {
  const seen = stringsOf(request.json);
  const prompt = seen.find((text) => text.includes('Which event carries') || text.includes('How many error events')) ?? '';
  const reference = seen.find((text) => /^artifact art_[0-9a-f]{12}: [\d,]+ bytes/.test(text));
  if (reference === undefined) return { kind: 'turn', toolCalls: [{ name: 'grynya__query_graph', args: { query: QUERY } }] };
  const artifact = /^artifact (art_[0-9a-f]{12})/.exec(reference)?.[1] as string;
  if (prompt.includes('Which event carries')) {
    const grep = seen.find((text) => /: [\d,]+ match(es)? of /.test(text));
    if (grep === undefined) return { kind: 'turn', toolCalls: [{ name: 'klym__grep_artifact', args: { artifact, pattern: NEEDLE.e.trace_id } }] };
    const record = /^\d+: (\{.*\})$/m.exec(grep)?.[1];
    if (record === undefined) return { kind: 'turn', text: 'not found' };
    const { e } = JSON.parse(record) as typeof NEEDLE;
    return { kind: 'turn', text: `${e.id} carries it: ${e.message}` };
  }
  // The reference names the table and its columns: the model writes the query at once.
  if (
    !reference.includes(
      `Query it with SQL as table ${artifact}: columns n (the line number, as the line tools number it), e STRUCT("id" VARCHAR, "label" VARCHAR, "service" VARCHAR, "severity" VARCHAR, "day" `,
    )
  ) {
    return { kind: 'turn', text: 'no table' };
  }
  const answer = seen.find((text) => / rows? from art_/.test(text));
  if (answer === undefined) {
    const sql = `SELECT e.service AS service, count(*) AS errors FROM ${artifact} WHERE e.severity = 'error' GROUP BY ALL ORDER BY service`;
    return { kind: 'turn', toolCalls: [{ name: 'klym__query_artifact', args: { sql } }] };
  }
  return { kind: 'turn', text: answer.split('\n').slice(1).join('\n') };
}

let grynya: FakeGrynya;
let answerText: string;
beforeAll(async () => {
  grynya = await createFakeGrynya({ bigGraph: { events: EVENTS } });
  // query_graph's answer as the real server writes it: json.dumps of the envelope around the rows.
  answerText = `{"status": "success", "results": ${grynya.graph.queryJson(QUERY)}}`;
}, 60_000);
afterAll(() => grynya.close());

async function setUp(runner: 'inline' | 'thread'): Promise<{ tasks: TaskManager; requests: FakeRequest[]; close(): Promise<void> }> {
  const directory = temporaryDirectory();
  const store = await createSqliteTaskStore({ path: path.join(directory.path, 'tasks.db') });
  const upstreams = { grynya: { url: grynya.sseUrl, transport: 'sse' as const, timeouts: { requestMs: 60_000 } } };
  const pool = await createSessionPool({ upstreams });
  const llm = await startFakeLlmServer(investigator, { contextWindow: WINDOW });
  const run = runner === 'thread' ? createThreadRunner({ upstreams, drainTimeoutMs: 100 }) : undefined;
  const tasks = createTaskManager({
    pool,
    store,
    ...(run === undefined ? {} : { run }),
    defaults: {
      model: 'openai:gpt-4.1-mini',
      providers: { openai: { apiKey: KEY, baseURL: llm.openaiBaseUrl } },
      contextWindows: { 'openai:gpt-4.1-mini': WINDOW },
    },
  });
  return {
    tasks,
    requests: llm.requests,
    async close() {
      await tasks.close({ graceMs: 0 });
      await run?.close();
      await llm.close();
      await pool.close({ drainTimeoutMs: 100 });
      await store.close();
      directory[Symbol.dispose]();
    },
  };
}

async function ended(tasks: TaskManager, id: string): Promise<TaskRecord> {
  await expect.poll(async () => (await tasks.get(id, me)).status, { timeout: 60_000, interval: 100 }).toMatch(/completed|error|cancelled/);
  return tasks.get(id, me);
}

describe('a 21 MB one-line graph answer, answered exactly', () => {
  it('is kept as 120,000 records, one per line: grep finds the event of a trace far into it (inline)', async () => {
    expect(answerText).not.toContain('\n');
    expect(Buffer.byteLength(answerText)).toBeGreaterThan(20_000_000);
    const { tasks, requests, close } = await setUp('inline');
    try {
      const task = await tasks.start({ prompt: `Which event carries trace ${NEEDLE.e.trace_id}, and what does its message say?` }, me);
      const done = await ended(tasks, task.id);
      expect(done).toMatchObject({ status: 'completed', result: { text: `${NEEDLE.e.id} carries it: ${NEEDLE.e.message}` } });
      // query_graph, grep, answer; none of the requests came near the window the answer passes 50 times over.
      expect(requests).toHaveLength(3);
      expect(Math.max(...requests.map((request) => request.tokens ?? Number.POSITIVE_INFINITY))).toBeLessThan(0.5 * WINDOW);

      const [artifact] = (await tasks.read(task.id, me, { tail: 1 })).artifacts;
      expect(artifact).toMatchObject({ tool: 'grynya__query_graph', lines: EVENTS + 1, records: { count: EVENTS, firstLine: 1, path: ['results'] } });
      // Grynya can still have the answer as the graph gave it, byte for byte.
      const original = await tasks.artifactOriginal(task.id, me, artifact?.id as string);
      expect(original.text === answerText).toBe(true);
    } finally {
      await close();
    }
  }, 120_000);

  it('counts error events per service with SQL over the records, exactly, and answers a follow-up question on the finished task (runner thread)', async () => {
    const { tasks, requests, close } = await setUp('thread');
    try {
      const task = await tasks.start({ prompt: 'How many error events does each service have?' }, me);
      const done = await ended(tasks, task.id);
      expect(done.status).toBe('completed');
      const expected = Object.entries(facts.errorsByService)
        .toSorted(([a], [b]) => a.localeCompare(b))
        .map(([service, errors]) => `${service},${errors}`);
      expect(done.result?.text).toBe(['service,errors', ...expected].join('\n'));
      expect(requests).toHaveLength(3);
      // The exact answer cost the model a reference and seven rows, not the 21 MB.
      const input = requests.reduce((sum, request) => sum + (request.tokens ?? 0), 0);
      expect(input).toBeLessThan(0.01 * (Buffer.byteLength(answerText) / 4));

      // The query is in the task's log with its SQL, rows and time.
      const queries = (await tasks.logs(task.id, me, { limit: 500 })).entries.filter((entry) => entry.type === 'artifact-query');
      expect(queries).toEqual([
        expect.objectContaining({ data: expect.objectContaining({ sql: expect.stringContaining("WHERE e.severity = 'error'"), rows: 7, columns: 2 }) }),
      ]);

      // A follow-up on the finished task's evidence: no new task, no model.
      const [artifact] = (await tasks.read(task.id, me, { tail: 1 })).artifacts;
      const bySeverity = await tasks.queryArtifacts(
        task.id,
        me,
        `SELECT e.severity AS severity, count(*) AS events FROM ${artifact?.id} GROUP BY ALL ORDER BY severity`,
      );
      expect(Object.fromEntries(bySeverity.rows.map(([severity, events]) => [severity, events]))).toEqual(facts.countsBySeverity);
      await expect(tasks.queryArtifacts(task.id, { principal: 'someone-else' }, 'SELECT 1')).rejects.toMatchObject({ code: 'TASK_NOT_FOUND' });
    } finally {
      await close();
    }
  }, 120_000);
});
