// Scenario 12 (issue #41): code over the evidence. The same diagnosis of the fake grynya's graph — for each
// service its dependencies, then each dependency's status: about 200 dependent `query_graph` calls — run twice
// against a fake OpenAI model that counts every request's input tokens with o200k_base: once as one
// `klym__run_code` program, once as a tool loop (one call a step, each request carrying the conversation).
// Then a program's host call against the upstream's own time (the same calls through the pool), and a
// sandbox's start.
import { createSessionPool, runAgent, type AgentEvent, type SessionPool } from '@klym/core';
import { createScriptedModel } from '@klym/core/internal';
import { createFakeGrynya, type FakeGrynya } from '@klym/fake-grynya';
import { runInSandbox } from '../packages/core/src/code/sandbox.ts';
import { startFakeLlmServer, type FakeReply, type FakeRequest } from '../test/support/fake-llm-server.ts';
import { figure, summarize } from './stats.ts';

const SERVICES = 101;
const MODEL = 'openai:gpt-4.1-mini';
/** The window Klym and the fake are given: larger than the loop's last request, so no compaction changes the loop. */
const WINDOW = 1_000_000;
const id = (n: number): string => `svc-${String(n).padStart(3, '0')}`;
const depsQuery = (service: string): string => `MATCH (s:Service {id: '${service}'})-[r]->(d) RETURN type(r), d.id`;
const nodeQuery = (service: string): string => `MATCH (n:Service {id: '${service}'}) RETURN n`;

/** Services depending on the next three; every seventh down. The broken ones: a dependency down. */
function loadServices(grynya: FakeGrynya): string[] {
  const { graph } = grynya;
  for (let n = 0; n < SERVICES; n++) graph.mergeNode('Service', { id: id(n), status: n % 7 === 3 ? 'down' : 'up' });
  for (let n = 0; n < SERVICES; n++) for (const k of [1, 2, 3]) if (n + k < SERVICES) graph.mergeRelation('DEPENDS_ON', id(n), id(n + k));
  const broken = [];
  for (let n = 0; n < SERVICES; n++) if ([1, 2, 3].some((k) => n + k < SERVICES && (n + k) % 7 === 3)) broken.push(id(n));
  return broken;
}

type Results = { results: Record<string, unknown>[] };

const thousands = (value: number): string => Math.round(value).toLocaleString('en-US');

/** The diagnosis as a coroutine: it yields each query and is given its answer, as a tool loop's model would be. */
function* diagnosis(): Generator<string, string[], Results> {
  const status = new Map<string, unknown>();
  const broken: string[] = [];
  for (let n = 0; n < SERVICES; n++) {
    const deps = yield depsQuery(id(n));
    for (const row of deps.results) {
      const dep = String(row['d.id']);
      if (!status.has(dep)) {
        const node = (yield nodeQuery(dep)).results[0]?.n as { properties: { status: string } } | undefined;
        status.set(dep, node?.properties.status);
      }
      if (status.get(dep) === 'down') {
        broken.push(id(n));
        break;
      }
    }
  }
  return broken;
}

/** The same diagnosis as the program the model writes. */
const PROGRAM = `const status = new Map(); const broken = [];
for (let n = 0; n < ${SERVICES}; n++) {
  const service = 'svc-' + String(n).padStart(3, '0');
  const deps = await callTool('grynya__query_graph', { query: "MATCH (s:Service {id: '" + service + "'})-[r]->(d) RETURN type(r), d.id" });
  for (const row of deps.json.results) {
    const dep = row['d.id'];
    if (!status.has(dep)) status.set(dep, (await callTool('grynya__query_graph', { query: "MATCH (n:Service {id: '" + dep + "'}) RETURN n" })).json.results[0].n.properties.status);
    if (status.get(dep) === 'down') { broken.push(service); break; }
  }
}
return JSON.stringify(broken);`;

/** The text of the last tool output in a request (Responses API or Chat Completions). */
function lastToolOutput(request: FakeRequest): string | undefined {
  const body = request.json as { input?: unknown[]; messages?: unknown[] };
  const items = (body.input ?? body.messages ?? []) as { type?: string; role?: string; output?: unknown; content?: unknown }[];
  const last = items.findLast((item) => item.type === 'function_call_output' || item.role === 'tool');
  if (last === undefined) return undefined;
  const value = last.output ?? last.content;
  return typeof value === 'string' ? value : JSON.stringify(value);
}

/** A model that writes the program, then answers with what it returned. */
function programmer(request: FakeRequest): FakeReply {
  const output = lastToolOutput(request);
  if (output === undefined) return { kind: 'turn', toolCalls: [{ name: 'klym__run_code', args: { code: PROGRAM } }] };
  return { kind: 'turn', text: output };
}

/** A model that makes the calls one a step, reading each answer from the conversation. */
function looper(): (request: FakeRequest) => FakeReply {
  const steps = diagnosis();
  return (request) => {
    const output = lastToolOutput(request);
    const next = output === undefined ? steps.next() : steps.next(JSON.parse(output) as Results);
    if (next.done === true) return { kind: 'turn', text: JSON.stringify(next.value) };
    return { kind: 'turn', toolCalls: [{ name: 'grynya__query_graph', args: { query: next.value } }] };
  };
}

interface Job {
  readonly answer: string;
  readonly requests: number;
  readonly inputTokens: number;
  readonly calls: number;
  readonly ms: number;
}

async function job(pool: SessionPool, grynya: FakeGrynya, reply: (request: FakeRequest) => FakeReply): Promise<Job> {
  const llm = await startFakeLlmServer(reply, { contextWindow: WINDOW });
  try {
    const before = grynya.stats.calls.query_graph ?? 0;
    const started = performance.now();
    const run = await runAgent({
      pool,
      prompt: 'Which services have a dependency that is down? Answer with their ids as a JSON array.',
      model: MODEL,
      providers: { openai: { apiKey: 'sk-bench-key-for-the-fake-000000', baseURL: llm.openaiBaseUrl } },
      contextWindows: { [MODEL]: WINDOW },
      budget: { maxSteps: 500 },
      maxRetries: 0,
    });
    return {
      answer: run.finalText,
      requests: llm.requests.length,
      inputTokens: llm.requests.reduce((sum, request) => sum + (request.tokens ?? 0), 0),
      calls: (grynya.stats.calls.query_graph ?? 0) - before,
      ms: performance.now() - started,
    };
  } finally {
    await llm.close();
  }
}

/**
 * A program's host call against the upstream's own time: `calls` sequential `callTool`s from a program, timed on the
 * host from one call's answer to the next (`code-call` events: the bridge both ways, the program's turn, the host
 * function — schema check, result kept or not — and the upstream's call), beside the same calls through the pool.
 */
async function hostCalls(pool: SessionPool, calls: number): Promise<{ program: number; upstream: number }> {
  const code = `for (let i = 0; i < ${calls}; i++) await callTool('grynya__query_graph', { query: 'RETURN ' + i }); return 'done';`;
  const model = createScriptedModel({ steps: [{ toolCalls: [{ toolName: 'klym__run_code', args: { code } }] }, { text: 'done' }] });
  const at: number[] = [];
  await runAgent({ pool, prompt: 'calls', model, onEvent: (event: AgentEvent) => void (event.type === 'code-call' && at.push(performance.now())) });
  const upstream: number[] = [];
  for (let i = 0; i < calls; i++) {
    const started = performance.now();
    await pool.callTool('grynya', 'query_graph', { query: `RETURN ${i}` });
    upstream.push(performance.now() - started);
  }
  return { program: summarize(at.slice(1).map((time, index) => time - (at[index] as number))).median, upstream: summarize(upstream).median };
}

/** One program that returns at once, from `runInSandbox`'s call to its answer, in ms. */
async function once(): Promise<number> {
  const started = performance.now();
  await runInSandbox({ code: 'return 1', host: {}, memoryMiB: 64, timeoutMs: 10_000 });
  return performance.now() - started;
}

/**
 * From `runInSandbox`'s call to its answer, for a program that returns at once. `warm`: half a second after the one
 * before, as programs come (a model step apart), so a spare thread has loaded meanwhile; `cold`: one right after
 * another, each waiting for its thread and QuickJS to load.
 */
async function sandboxStart(runs: number): Promise<{ warm: number; cold: number }> {
  const warm: number[] = [];
  const cold: number[] = [];
  for (let i = 0; i < runs; i++) {
    await new Promise((resolve) => setTimeout(resolve, 500));
    warm.push(await once());
    cold.push(await once());
  }
  return { warm: summarize(warm).median, cold: summarize(cold).median };
}

export async function codeFigures(options: { readonly quick: boolean }): Promise<string[]> {
  // The AI SDK warns of each request's schema compatibility (the fake's OpenAI): noise in the bench's output.
  (globalThis as { AI_SDK_LOG_WARNINGS?: boolean }).AI_SDK_LOG_WARNINGS = false;
  const grynya = await createFakeGrynya();
  const pool = await createSessionPool({ upstreams: { grynya: { url: grynya.mcpUrl } } });
  try {
    await pool.warmedUp();
    const expected = JSON.stringify(loadServices(grynya));
    const code = await job(pool, grynya, programmer);
    const loop = await job(pool, grynya, looper());
    const host = await hostCalls(pool, options.quick ? 100 : 400);
    const start = await sandboxStart(options.quick ? 10 : 30);
    const exact = code.answer === expected && loop.answer === expected;
    const row = (name: string, run: Job): string =>
      `| ${name} | ${run.calls} | ${run.requests} | ${thousands(run.inputTokens)} | ${thousands(run.ms)} ms | ${run.answer === expected ? 'exact' : `wrong: ${run.answer.slice(0, 80)}`} |`;
    return [
      `The fake grynya's graph: ${SERVICES} services, each depending on the next three, every seventh down; the job finds`,
      'the services with a dependency down, a query for each service and one for each dependency first met. Input tokens',
      "are o200k_base's, as the fake model counts each request (the system prompt and the tool definitions included).",
      '',
      '| the 200-call job | query_graph calls | model requests | input tokens | time | answer |',
      '| --- | --- | --- | --- | --- | --- |',
      row('one klym__run_code program', code),
      row('a tool loop, one call a step', loop),
      '',
      `A program's host call, p50 from one callTool's answer to the next (${options.quick ? 100 : 400} calls): ${host.program.toFixed(3)} ms; the same`,
      `call through the pool (the loopback upstream's own time): ${host.upstream.toFixed(3)} ms; the difference ${(host.program - host.upstream).toFixed(3)} ms (target ≤ 1).`,
      `A sandbox's start to the answer of \`return 1\`, p50 of ${options.quick ? 10 : 30}: ${start.warm.toFixed(1)} ms on the spare thread loaded while the`,
      `process waited (as programs come, a model step apart), ${start.cold.toFixed(1)} ms right after another (a thread, QuickJS's WASM module and runtime loaded for it).`,
      figure('deep_answer_exact', exact ? 1 : 0, 0),
      figure('deep_tokens_ratio', code.inputTokens / loop.inputTokens, 4),
      figure('code_host_call_ms_p50', host.program - host.upstream, 3),
      figure('code_upstream_call_ms_p50', host.upstream, 3),
      figure('code_start_ms', start.warm, 1),
      figure('code_cold_start_ms', start.cold, 1),
    ];
  } finally {
    await pool.close({ drainTimeoutMs: 100 });
    await grynya.close();
  }
}
