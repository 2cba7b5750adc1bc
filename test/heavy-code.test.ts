// Issue #41: `klym__run_code`, a program the model writes, run in a sandbox over the run's tools and artifacts. A
// diagnosis that needs 200 dependent graph calls is one tool call and two model requests (as a tool loop, 202 requests
// carrying ten times the characters and more); a program past
// its time or memory fails that call only, naming the limit, and the run goes on; a denied tool's refusal reaches
// the program as an error it catches; a cancelled task interrupts its program; sql/read/grep read an artifact.
import { runAgent, type AgentEvent, type SessionPool } from '@klym/core';
import { createScriptedModel } from '@klym/core/internal';
import type { FakeGrynya } from '@klym/fake-grynya';
import { afterEach, describe, expect, it } from 'vitest';
import { grynyaPool } from './support/grynya-pool.ts';
import { programmer } from './support/programmer.ts';

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).toReversed()) await cleanup();
});

const SERVICES = 101;
const id = (n: number): string => `svc-${String(n).padStart(3, '0')}`;

/** A graph of services, each depending on the next three; every seventh service is down. */
function loadServices(grynya: FakeGrynya): { broken: string[] } {
  const { graph } = grynya;
  for (let n = 0; n < SERVICES; n++) graph.mergeNode('Service', { id: id(n), status: n % 7 === 3 ? 'down' : 'up' });
  for (let n = 0; n < SERVICES; n++) for (const k of [1, 2, 3]) if (n + k < SERVICES) graph.mergeRelation('DEPENDS_ON', id(n), id(n + k));
  // A service is broken by a dependency that is down.
  const broken = [];
  for (let n = 0; n < SERVICES; n++) if ([1, 2, 3].some((k) => n + k < SERVICES && (n + k) % 7 === 3)) broken.push(id(n));
  return { broken };
}

/** The model's program: for each service, its dependencies, then each dependency's status — dependent calls. */
const DIAGNOSIS = `
const services = [];
for (let n = 0; n < ${SERVICES}; n++) services.push('svc-' + String(n).padStart(3, '0'));
const status = new Map();
const broken = [];
for (const service of services) {
  const deps = await callTool('grynya__query_graph', { query: "MATCH (s:Service {id: '" + service + "'})-[r]->(d) RETURN type(r), d.id" });
  for (const row of deps.json.results) {
    const dep = row['d.id'];
    if (!status.has(dep)) {
      const node = await callTool('grynya__query_graph', { query: "MATCH (n:Service {id: '" + dep + "'}) RETURN n" });
      status.set(dep, node.json.results[0].n.properties.status);
    }
    if (status.get(dep) === 'down') { broken.push(service); break; }
  }
}
log('checked', services.length, 'services');
return { broken };`;

async function setUp(): Promise<{ grynya: FakeGrynya; pool: SessionPool }> {
  return grynyaPool(cleanups);
}

/** A query_graph call, as the looping model makes it. */
const query = (text: string) => ({ toolCalls: [{ toolName: 'grynya__query_graph', args: { query: text } }] });
/** The rows of the last tool result the model was given. */
const lastRows = (prompt: readonly { role: string; content: unknown }[]): Record<string, unknown>[] => {
  const last = prompt.at(-1) as { role: string; content: { type: string; output?: { value?: unknown } }[] };
  const value = last.role === 'tool' ? last.content[0]?.output?.value : undefined;
  return typeof value === 'string' ? (JSON.parse(value) as { results: Record<string, unknown>[] }).results : [];
};
const chars = (sent: readonly string[]): number => sent.reduce((sum, request) => sum + request.length, 0);

/** DIAGNOSIS as a tool loop: one query_graph call a step, the next decided from the last result. */
function toolLooper() {
  const requests: string[] = [];
  const status = new Map<string, string>();
  const broken: string[] = [];
  let service = 0;
  let deps: string[] = [];
  let asked: { kind: 'deps' } | { kind: 'status'; dep: string } | undefined;
  /** The next call for the current service, or the next service's, or the answer. */
  const next = (): ReturnType<typeof query> | { text: string } => {
    for (;;) {
      const dep = deps.shift();
      if (dep !== undefined && !status.has(dep)) {
        asked = { kind: 'status', dep };
        return query(`MATCH (n:Service {id: '${dep}'}) RETURN n`);
      }
      if (dep !== undefined && status.get(dep) === 'down') {
        broken.push(id(service));
        deps = [];
      }
      if (dep !== undefined && status.get(dep) !== 'down') continue;
      if (++service >= SERVICES) return { text: JSON.stringify({ broken }) };
      asked = { kind: 'deps' };
      return query(`MATCH (s:Service {id: '${id(service)}'})-[r]->(d) RETURN type(r), d.id`);
    }
  };
  const model = createScriptedModel({
    steps: ({ call, options }) => {
      requests.push(JSON.stringify(options.prompt));
      if (call === 1) {
        asked = { kind: 'deps' };
        return query(`MATCH (s:Service {id: '${id(0)}'})-[r]->(d) RETURN type(r), d.id`);
      }
      const rows = lastRows(options.prompt);
      if (asked?.kind === 'deps') {
        deps = rows.map((row) => String(row['d.id']));
      } else if (asked?.kind === 'status') {
        status.set(asked.dep, String((rows[0]?.n as { properties: { status: string } } | undefined)?.properties.status));
        // The dependency just read decides, as in the program: back in front of the rest.
        deps.unshift(asked.dep);
      }
      return next();
    },
  });
  return { model, requests };
}

describe('klym__run_code', () => {
  it('diagnoses the graph with 200 dependent query_graph calls in one tool call: exact answer, two model requests', async () => {
    const { grynya, pool } = await setUp();
    const { broken } = loadServices(grynya);
    const { model, requests } = programmer(DIAGNOSIS);
    const events: AgentEvent[] = [];
    const run = await runAgent({ pool, prompt: 'Which services have a dependency that is down?', model, onEvent: (event) => void events.push(event) });
    expect(run.finishReason).toBe('stop');
    expect(run.finalText).toBe(`text: ${JSON.stringify({ broken })}`);
    expect(broken.length).toBeGreaterThan(20);
    expect(requests).toHaveLength(2);
    expect(run.toolCalls).toHaveLength(1);
    const calls = events.filter((event) => event.type === 'code-call' && event.name === 'callTool');
    // One dependency query per service, one status query per service that is someone's dependency.
    expect(calls.length).toBeGreaterThanOrEqual(200);
    expect(calls.every((event) => event.type === 'code-call' && event.name === 'callTool' && event.target === 'grynya__query_graph' && event.bytes > 0)).toBe(
      true,
    );
    expect(calls.map((event) => (event.type === 'code-call' ? event.call : 0))).toEqual(calls.map((_, index) => index + 1));
    expect(events.filter((event) => event.type === 'code-call').at(-1)).toMatchObject({ name: 'log', call: calls.length + 1 });
    expect(events.find((event) => event.type === 'code-start')).toMatchObject({ step: 1, code: DIAGNOSIS });
    expect(events.find((event) => event.type === 'code-log')).toMatchObject({ text: `checked ${SERVICES} services` });
    expect(events.find((event) => event.type === 'code-end')).toMatchObject({ calls: calls.length + 1 });
    expect(grynya.stats.calls.query_graph).toBe(calls.length);
  }, 60_000);

  it('does the same job as a tool loop for comparison: the same answer, one request per call, each carrying all before it', async () => {
    const { grynya, pool } = await setUp();
    const { broken } = loadServices(grynya);
    const loop = toolLooper();
    const looped = await runAgent({ pool, prompt: 'Which services have a dependency that is down?', model: loop.model, budget: { maxSteps: 400 } });
    expect(looped.finishReason).toBe('stop');
    expect(looped.finalText).toBe(JSON.stringify({ broken }));
    expect(loop.requests.length).toBeGreaterThanOrEqual(201);

    const { model, requests } = programmer(DIAGNOSIS);
    const coded = await runAgent({ pool, prompt: 'Which services have a dependency that is down?', model });
    expect(coded.finalText).toBe(`text: ${JSON.stringify({ broken })}`);
    // What the model is sent, in characters of its requests: the program's two against the loop's hundreds (the
    // bench counts the same in o200k tokens: deep_tokens_ratio).
    expect(chars(requests) / chars(loop.requests)).toBeLessThan(0.1);
  }, 120_000);

  it('fails a program that loops forever naming code.timeoutMs, and the run goes on', async () => {
    const { pool } = await setUp();
    const { model, requests } = programmer('for (;;) {}');
    const run = await runAgent({ pool, prompt: 'loop', model, code: { timeoutMs: 300 } });
    expect(run.finishReason).toBe('stop');
    expect(run.finalText).toBe('error-text: KlymError: The program ran past its time limit: code.timeoutMs is 300 ms');
    expect(requests).toHaveLength(2);
  });

  it('fails a program that allocates past its memory naming code.memoryMiB, and the run goes on', async () => {
    const { pool } = await setUp();
    const { model } = programmer('const parts = []; for (let i = 0; ; i++) parts.push({ i, text: "part " + i });');
    const run = await runAgent({ pool, prompt: 'allocate', model, code: { memoryMiB: 8 } });
    expect(run.finalText).toBe('error-text: KlymError: The program ran out of memory: code.memoryMiB is 8 MiB');
  });

  it("hands a denied tool's refusal to the program as an error it can catch", async () => {
    const { pool } = await setUp();
    const code = `try { await callTool('grynya__add_node', { node_type: 'Note', node_data: { id: 'x' } }); return 'written' } catch (error) { return 'refused: ' + error.message }`;
    const { model } = programmer(code);
    const run = await runAgent({ pool, prompt: 'write', model, tools: { policy: 'read-only' } });
    expect(run.finalText).toBe(
      `text: refused: Tool grynya__add_node is denied by policy "read-only": "grynya__add_node" is not read-only (not annotated readOnlyHint, nor configured as read-only)`,
    );
  });

  it("is interrupted by its task's cancel mid-way", async () => {
    const { grynya, pool } = await setUp();
    grynya.faults.delayMs = 20;
    const controller = new AbortController();
    const code = `for (let i = 0; ; i++) { await callTool('grynya__query_graph', { query: 'RETURN ' + i }); if (i === 4) log('five done'); }`;
    const { model } = programmer(code);
    const events: AgentEvent[] = [];
    const run = await runAgent({
      pool,
      prompt: 'forever',
      model,
      signal: controller.signal,
      onEvent: (event) => {
        events.push(event);
        if (event.type === 'code-log') controller.abort();
      },
    });
    expect(run.finishReason).toBe('cancelled');
    expect(events.find((event) => event.type === 'code-end')).toMatchObject({ error: 'The program was interrupted: its task was cancelled' });
    const calls = grynya.stats.calls.query_graph ?? 0;
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(grynya.stats.calls.query_graph).toBe(calls);
    expect(calls).toBeLessThan(8);
  });

  it('reads an artifact with sql, read and grep from a program', async () => {
    const { grynya, pool } = await setUp();
    grynya.graph.loadEvents(3_000);
    const code = `
const graph = await callTool('grynya__query_graph', { query: 'MATCH (e:Event) RETURN e' });
if (graph.artifact === null) return 'not kept';
const rows = await sql("SELECT e.severity AS severity, count(*) AS events FROM " + graph.artifact + " GROUP BY ALL ORDER BY severity");
const page = await read(graph.artifact, { offset: 1, limit: 2 });
const found = await grep(graph.artifact, '"severity":"error"');
return { rows, first: JSON.parse(page.lines[0].text).e.id, lines: page.lines.length, errors: found.total };`;
    const { model } = programmer(code);
    const run = await runAgent({ pool, prompt: 'count', model, artifactThresholdTokens: 2_000 });
    const answer = JSON.parse(run.finalText.replace(/^text: /, '')) as {
      rows: { severity: string; events: number }[];
      first: string;
      lines: number;
      errors: number;
    };
    const bySeverity = Object.fromEntries(answer.rows.map((row) => [row.severity, row.events]));
    expect(Object.values(bySeverity).reduce((sum, events) => sum + events, 0)).toBe(3_000);
    expect(answer.lines).toBe(2);
    expect(answer.first).toMatch(/^ev-/);
    expect(answer.errors).toBe(bySeverity.error);
  });
});
