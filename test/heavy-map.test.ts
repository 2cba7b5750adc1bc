// Issue #27, klym__map_artifact: an exact aggregate over a log more than ten times the model's window,
// computed by a model call per chunk — the real OpenAI provider against a local fake of its API that
// plays both the agent and the model answering each chunk — over @modelcontextprotocol/server-filesystem
// on stdio serving a 6 MB log the test writes.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createSessionPool, runAgent, type AgentBudget, type AgentUsage, type RunAgentOptions, type SessionPool } from '@klym/core';
import { createArtifactStore, createMemoryArtifacts, ARTIFACT_DEFAULTS } from '@klym/core/artifacts';
import { createScriptedModel, createTokenCounter } from '@klym/core/internal';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bigLog } from './support/big-log-server.ts';
import { startFakeLlmServer, type FakeLlmServer, type FakeReply, type FakeRequest } from './support/fake-llm-server.ts';
import { packageFile } from './support/upstream-servers.ts';

const KEY = 'sk-test-key-for-the-fake-0123456789';
const LINES = 70_000;
const NEEDLE_AT = 31_337;
const LOG = bigLog(LINES, NEEDLE_AT);
const INSTRUCTION = 'Count the ERROR lines per service; answer as service=count pairs separated by spaces.';
const MAP_USAGE = { input: 1_000, output: 12 };
/** The model's window, as Klym is configured with it and as the fake enforces it (counted by o200k_base). */
const WINDOW = 64_000;
const providers = (baseURL: string) => ({ providers: { openai: { apiKey: KEY, baseURL } }, contextWindows: { 'openai:gpt-4.1-mini': WINDOW } });

/** The counts a correct map finds: ERROR lines per service, from the log itself. */
function expectedCounts(): Map<string, number> {
  const counts = new Map<string, number>();
  for (const match of LOG.matchAll(/ (svc-\d+) ERROR /g)) counts.set(match[1] as string, (counts.get(match[1] as string) ?? 0) + 1);
  return counts;
}

const format = (counts: ReadonlyMap<string, number>): string =>
  [...counts]
    .toSorted(([a], [b]) => a.localeCompare(b))
    .map(([service, count]) => `${service}=${count}`)
    .join(' ');

/** What the fake's map calls saw: in flight now, at most at once, in all. */
const maps = { inFlight: 0, most: 0, calls: 0 };

/** The model answering one chunk: it counts what the chunk's lines say, after a short wait (so that calls overlap). */
function mapAnswer(body: string): FakeReply {
  const counts = new Map<string, number>();
  // Lines in the request's JSON: `\n<n>: <line>` with the newline escaped.
  for (const match of body.matchAll(/\\n\d+: [^\\]* (svc-\d+) ERROR /g)) counts.set(match[1] as string, (counts.get(match[1] as string) ?? 0) + 1);
  maps.calls++;
  maps.most = Math.max(maps.most, ++maps.inFlight);
  const turn: FakeReply = { kind: 'turn', text: counts.size === 0 ? 'nothing' : format(counts), usage: MAP_USAGE };
  return {
    kind: 'later',
    reply: new Promise<FakeReply>((resolve) =>
      setTimeout(() => {
        maps.inFlight--;
        resolve(turn);
      }, 20),
    ),
  };
}

/** The agent: reads the log, maps the artifact it was given, then sums the chunks' answers. */
function agent(request: FakeRequest): FakeReply {
  if (request.body.includes('You are given one chunk of a larger text')) return mapAnswer(request.body);
  const artifact = /artifact (art_[0-9a-f]{12}): [\d,]+ bytes/.exec(request.body)?.[1];
  if (artifact === undefined) return { kind: 'turn', toolCalls: [{ name: 'files__read_text_file', args: { path: FILE } }] };
  if (!/answered on each of \d+ chunks/.test(request.body))
    return { kind: 'turn', toolCalls: [{ name: 'klym__map_artifact', args: { artifact, instruction: INSTRUCTION } }] };
  const totals = new Map<string, number>();
  for (const match of request.body.matchAll(/(svc-\d+)=(\d+)/g)) totals.set(match[1] as string, (totals.get(match[1] as string) ?? 0) + Number(match[2]));
  return { kind: 'turn', text: format(totals) };
}

const DIRECTORY = mkdtempSync(path.join(tmpdir(), 'klym-heavy-map-'));
const FILE = path.join(DIRECTORY, 'night.log');
writeFileSync(FILE, LOG);

let pool: SessionPool;
let llm: FakeLlmServer;
beforeAll(async () => {
  pool = await createSessionPool({
    upstreams: { files: { command: process.execPath, args: [packageFile('@modelcontextprotocol/server-filesystem', 'dist/index.js'), DIRECTORY] } },
  });
  llm = await startFakeLlmServer(agent, { contextWindow: WINDOW });
});
afterAll(async () => {
  await llm.close();
  await pool.close({ drainTimeoutMs: 100 });
  rmSync(DIRECTORY, { recursive: true, force: true });
});

describe('klym__map_artifact', () => {
  it('counts ERROR lines per service exactly over a log more than ten times the window, each line in exactly one chunk, with bounded concurrency', async () => {
    // More than ten times the window even at 4 characters a token (logs take fewer).
    expect(LOG.length / 4).toBeGreaterThan(10 * WINDOW);
    const result = await runAgent({ pool, prompt: 'How many ERROR lines per service?', model: 'openai:gpt-4.1-mini', ...providers(llm.openaiBaseUrl) });

    expect(result.text).toBe(format(expectedCounts()));
    // The map's answers, as the agent was sent them: consecutive line ranges from the first line to the last.
    const last = llm.requests.at(-1)?.body ?? '';
    const ranges = [...last.matchAll(/\[lines (\d+)-(\d+)\]/g)].map((match) => [Number(match[1]), Number(match[2])] as const);
    expect(ranges.length).toBe(maps.calls);
    expect(ranges[0]?.[0]).toBe(0);
    expect(ranges.at(-1)?.[1]).toBe(LINES - 1);
    for (let index = 1; index < ranges.length; index++) expect(ranges[index]?.[0]).toBe((ranges[index - 1]?.[1] ?? 0) + 1);
    // At most mapConcurrency calls at once, and more than one.
    expect(maps.most).toBeLessThanOrEqual(ARTIFACT_DEFAULTS.mapConcurrency);
    expect(maps.most).toBeGreaterThan(1);
    // The map's calls count in the run's usage.
    expect(result.usage.inputTokens).toBeGreaterThanOrEqual(maps.calls * MAP_USAGE.input);
    // Every request, as the provider counts it, fits the window with room to answer.
    expect(Math.max(...llm.requests.map((request) => request.tokens ?? Number.POSITIVE_INFINITY))).toBeLessThan(0.95 * WINDOW);
  });
});

/** The exact count as one query over the log's table. */
const errorsQuery = (artifact: string): string =>
  `SELECT regexp_extract(line, 'svc-\\d+') AS service, count(*) AS errors FROM ${artifact} WHERE line LIKE '% ERROR %' GROUP BY ALL ORDER BY service`;

describe('klym__query_artifact over the same log', () => {
  it('counts ERROR lines per service exactly with one query: its requests cost a hundredth of the log', async () => {
    const querying = await startFakeLlmServer(
      (request) => {
        const artifact = /artifact (art_[0-9a-f]{12}): [\d,]+ bytes/.exec(request.body)?.[1];
        if (artifact === undefined) return { kind: 'turn', toolCalls: [{ name: 'files__read_text_file', args: { path: FILE } }] };
        const rows = /\d+ rows? from art_[0-9a-f]{12} \(CSV\):((?:\\n[^\\"]+)+)/.exec(request.body)?.[1];
        if (rows === undefined) return { kind: 'turn', toolCalls: [{ name: 'klym__query_artifact', args: { sql: errorsQuery(artifact) } }] };
        const counts = new Map(
          rows
            .split('\\n')
            .slice(2)
            .map((row) => [row.split(',')[0] as string, Number(row.split(',')[1])] as const),
        );
        return { kind: 'turn', text: format(counts) };
      },
      { contextWindow: WINDOW },
    );
    try {
      const result = await runAgent({ pool, prompt: 'How many ERROR lines per service?', model: 'openai:gpt-4.1-mini', ...providers(querying.openaiBaseUrl) });
      expect(result.text).toBe(format(expectedCounts()));
      // Read, query, answer: three requests, whose tokens together are not a hundredth of the log's, both by o200k as the fake counts them.
      expect(querying.requests).toHaveLength(3);
      const sent = querying.requests.reduce((sum, request) => sum + (request.tokens ?? Number.POSITIVE_INFINITY), 0);
      expect(sent).toBeLessThan((await createTokenCounter('openai:gpt-4.1-mini')).count(LOG) / 100);
    } finally {
      await querying.close();
    }
  });
});

describe('klym__map_artifact, cancelled', () => {
  it('cancels the calls under way with the run, and starts no more', async () => {
    const hanging = await startFakeLlmServer(
      (request) => (request.body.includes('You are given one chunk of a larger text') ? { kind: 'hang' } : agent(request)),
      { contextWindow: WINDOW },
    );
    try {
      const controller = new AbortController();
      const running = runAgent({ pool, prompt: 'count', model: 'openai:gpt-4.1-mini', ...providers(hanging.openaiBaseUrl), signal: controller.signal });
      const mapCalls = (): FakeRequest[] => hanging.requests.filter((request) => request.body.includes('You are given one chunk'));
      await expect.poll(() => mapCalls().length, { timeout: 15_000 }).toBe(ARTIFACT_DEFAULTS.mapConcurrency);
      controller.abort();
      expect((await running).finishReason).toBe('cancelled');
      await expect.poll(() => hanging.abandoned.length).toBe(ARTIFACT_DEFAULTS.mapConcurrency);
      expect(mapCalls()).toHaveLength(ARTIFACT_DEFAULTS.mapConcurrency);
    } finally {
      await hanging.close();
    }
  });
});

/** The scripted model's tokenizer, as the run counts a map call with it. */
const counter = await createTokenCounter('scripted');

describe('a map within its run’s budget', () => {
  /** What the agent's own step reports: counted when its step ends, after the map it called. */
  const STEP_USAGE = { inputTokens: 40, outputTokens: 8 };

  /**
   * A run that maps the log four calls at a time within `budget`, each map call reporting its input as the run
   * counted it (as a provider counting with the same tokenizer would) and 12 tokens out, after a moment so that
   * calls overlap. What it spent, the map's own spend, and the map calls at most under way at once.
   */
  async function mapRun(budget: AgentBudget, prices?: RunAgentOptions['prices']) {
    const empty = await createSessionPool({ upstreams: {} });
    try {
      const backend = createMemoryArtifacts();
      const { id } = await createArtifactStore({ backend }).put('fs__read_text_file', LOG);
      const calls = { inFlight: 0, most: 0, count: 0 };
      const model = createScriptedModel({
        steps: async ({ options }) => {
          const system = options.prompt.flatMap((message) => (message.role === 'system' ? [message.content] : []));
          const prompt = JSON.stringify(options.prompt);
          if (!prompt.includes('You are given one chunk of a larger text')) {
            const tool = { toolName: 'klym__map_artifact', args: { artifact: id, instruction: INSTRUCTION } };
            return prompt.includes('the map stopped early') ? { text: 'partial counts', usage: STEP_USAGE } : { toolCalls: [tool], usage: STEP_USAGE };
          }
          const user = options.prompt
            .flatMap((message) => (message.role === 'user' ? message.content : []))
            .flatMap((part) => (part.type === 'text' ? [part.text] : []));
          calls.count++;
          calls.most = Math.max(calls.most, ++calls.inFlight);
          await new Promise((resolve) => setTimeout(resolve, 5));
          calls.inFlight--;
          return { text: 'nothing', usage: { inputTokens: counter.count(system.join('')) + counter.count(user.join('')), outputTokens: 12 } };
        },
      });
      const mapped: AgentUsage[] = [];
      const run = await runAgent({
        pool: empty,
        prompt: 'Count the errors.',
        model,
        artifacts: backend,
        mapConcurrency: 4,
        budget,
        ...(prices === undefined ? {} : { prices }),
        onEvent: (event) => void (event.type === 'artifact-map' && mapped.push(event.usage)),
      });
      const result = run.messages.flatMap((message) => (message.role === 'tool' ? message.content : [])).find((part) => part.type === 'tool-result');
      return { run, map: mapped[0] ?? { inputTokens: 0, outputTokens: 0, totalTokens: 0, estimated: false }, calls, said: JSON.stringify(result) };
    } finally {
      await empty.close();
    }
  }

  /** The most one map call holds: a chunk of 32,000 tokens and the answer's allowance. */
  const MOST_PER_CALL = ARTIFACT_DEFAULTS.mapChunkTokens + ARTIFACT_DEFAULTS.mapAnswerTokens;

  it('holds max_tokens with four calls at once: the map stops before the next call could pass it, says so, and the run ends on it', async () => {
    const maxTokens = 300_000;
    const { run, map, calls, said } = await mapRun({ maxTokens });

    // Before, the three calls under way beside the one that reached the budget were not counted: 300,000 spent ~376,000.
    expect(map.totalTokens).toBeLessThanOrEqual(maxTokens);
    expect(map.totalTokens + MOST_PER_CALL).toBeGreaterThan(maxTokens);
    expect(calls.most).toBe(4);
    expect(calls.count).toBeLessThan(LOG.length / 4 / ARTIFACT_DEFAULTS.mapChunkTokens);
    expect(said).toMatch(/the map stopped early \(the run's token budget cannot pay for another call: [\d,]+ of 300,000 tokens spent/);
    // The run ends on the budget the map could not pay, not on the model's word: its step is the last.
    expect(run.finishReason).toBe('budget:tokens');
    expect(run.steps).toBe(1);
    // The agent's own step is counted as it ends, after the map it called.
    expect(run.usage.totalTokens).toBe(map.totalTokens + STEP_USAGE.inputTokens + STEP_USAGE.outputTokens);
  });

  it('holds max_cost_usd the same way, priced as the run prices usage', async () => {
    const price = { inputPerMillion: 2, outputPerMillion: 8 };
    const maxCostUsd = 0.5;
    const { run, map, calls, said } = await mapRun({ maxCostUsd }, { 'scripted:script': price });

    const mapUsd = (map.inputTokens * price.inputPerMillion + map.outputTokens * price.outputPerMillion) / 1e6;
    expect(mapUsd).toBeLessThanOrEqual(maxCostUsd);
    expect(mapUsd + (ARTIFACT_DEFAULTS.mapChunkTokens * 2 + ARTIFACT_DEFAULTS.mapAnswerTokens * 8) / 1e6).toBeGreaterThan(maxCostUsd);
    expect(calls.most).toBe(4);
    expect(said).toMatch(/the map stopped early \(the run's cost budget cannot pay for another call: \$0\.\d{4} of \$0\.5 spent/);
    expect(run.finishReason).toBe('budget:cost');
  });
});
