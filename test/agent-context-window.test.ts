// Context accounting (#27, item 1) with real parts: the real @ai-sdk/openai provider against a fake OpenAI API
// over loopback whose hard window is counted by the real o200k tokenizer, and an MCP upstream serving a log.
import { createSessionPool, createTaskService, isKlymError, runAgent, type AgentEvent, type RunAgentOptions, type SessionPool } from '@klym/core';
import { createTokenCounter, DROPPED_RESULT_NOTE } from '@klym/core/internal';
import { createInMemoryUpstream } from '@klym/core/testing';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import { startFakeLlmServer, type FakeLlmServer, type FakeReply } from './support/fake-llm-server.ts';

const KEY = 'sk-test-0123456789abcdef';
const LEVELS = ['ERROR', 'WARN', 'INFO'];
const pad = (value: number, width: number): string => String(value).padStart(width, '0');

/** Lines of a service log, `from` on: timestamps, numbers and short ids, about 2.3 characters a token in o200k. */
function logLines(from: number, count: number): string {
  const lines: string[] = [];
  for (let index = from; index < from + count; index++) {
    const id = ((index * 2_654_435_761) >>> 0).toString(16).slice(0, 4);
    const time = `2026-11-25T03:${pad(Math.floor(index / 60) % 60, 2)}:${pad(index % 60, 2)}.${pad((index * 37) % 1000, 3)}Z`;
    lines.push(`${time} svc-${index % 9} ${LEVELS[index % 3]} code=${5000 + ((index * 7919) % 1000)} id=${id} request failed`);
  }
  return lines.join('\n');
}

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).toReversed()) await cleanup();
});

/** An MCP server whose `read` tool returns `lines` lines of the log from line `from`. */
function logServer(): McpServer {
  const mcp = new McpServer({ name: 'logs', version: '1.0.0' });
  mcp.registerTool(
    'read',
    { description: 'Reads lines of the service log', inputSchema: { from: z.number().int(), lines: z.number().int() } },
    ({ from, lines }) => ({
      content: [{ type: 'text', text: logLines(from, lines) }],
    }),
  );
  return mcp;
}

/** A pool with one upstream, `logs` ({@link logServer}). */
async function logPool(): Promise<SessionPool> {
  const pool = await createSessionPool({ upstreams: { logs: createInMemoryUpstream(logServer) } });
  cleanups.push(() => pool.close());
  return pool;
}

async function fakeLlm(replies: FakeReply[], contextWindow: number): Promise<FakeLlmServer> {
  const fake = await startFakeLlmServer(replies, { contextWindow });
  cleanups.push(() => fake.close());
  return fake;
}

/** gpt-4.1-mini served by `fake`, over the Responses API unless `api` says chat. */
const gptOn = (fake: FakeLlmServer, api: 'responses' | 'chat' = 'responses'): Pick<RunAgentOptions, 'model' | 'providers'> => ({
  model: 'openai:gpt-4.1-mini',
  providers: { openai: { apiKey: KEY, baseURL: fake.openaiBaseUrl, api } },
});

const read = (from: number, lines: number): FakeReply => ({ kind: 'turn', toolCalls: [{ name: 'logs__read', args: { from, lines } }] });

describe('context accounting against a provider with a hard window', () => {
  it("counts a log with the real tokenizer, never under and within 2% of the fake's count of the body sent, where characters ÷ 4 undercounts it by 40%", async () => {
    const pool = await logPool();
    const fake = await fakeLlm([{ kind: 'turn', text: 'Counted.' }], 1_047_576);
    const log = logLines(0, 10_000);
    const events: AgentEvent[] = [];

    const run = await runAgent({
      pool,
      prompt: `Count the errors per service in this log:\n${log}`,
      ...gptOn(fake),
      onEvent: (event) => events.push(event),
    });

    expect(run.finalText).toBe('Counted.');
    const provider = fake.requests[0]?.tokens ?? 0;
    const klym = events.find((event) => event.type === 'llm-request')?.tokens ?? 0;
    expect(provider).toBeGreaterThan(250_000);
    // Klym counts the messages before the AI SDK writes them; the fake counts the body it received, with the same
    // tokenizer and the same framing (so this checks what the SDK adds on the wire, not the provider's framing:
    // packages/core/src/agent/token-count-published.test.ts checks that against the counts OpenAI published).
    // Klym never counts less than the fake, and no more than 2% over it.
    expect(klym).toBeGreaterThanOrEqual(provider);
    expect(klym / provider).toBeLessThan(1.02);
    // A heuristic would be far off: characters ÷ 4 by about 40% under, Klym's estimate for unknown tokenizers well over.
    expect(log.length / 4 / provider).toBeLessThan(0.62);
    expect((await createTokenCounter('google:gemini-2.5-flash')).count(log) / provider).toBeGreaterThan(1.2);
    // The usage the fake reports is its own count.
    expect(run.usage.inputTokens).toBe(provider);
  });

  for (const api of ['responses', 'chat'] as const) {
    it(`never sends a request over the window (${api}): the run fails with CONTEXT_OVERFLOW naming the model, the window and the count`, async () => {
      const pool = await logPool();
      const fake = await fakeLlm([read(0, 1_000), { kind: 'turn', text: 'never asked' }], 20_000);
      const events: AgentEvent[] = [];

      const failure: unknown = await runAgent({
        pool,
        prompt: 'Count the errors per service.',
        ...gptOn(fake, api),
        // The configured window overrides gpt-4.1-mini's built-in 1,047,576.
        contextWindows: { 'openai:gpt-4.1-mini': 20_000 },
        // Results stay in the conversation: by default a tenth of the window would make this one an artifact.
        artifactThresholdTokens: 1_000_000,
        onEvent: (event) => events.push(event),
      }).catch((error: unknown) => error);

      expect(isKlymError(failure, 'CONTEXT_OVERFLOW')).toBe(true);
      const message = (failure as Error).message;
      expect(message).toMatch(
        /^The request to model openai:gpt-4\.1-mini would take (\d+) tokens \(counted with o200k_base\), more than its context window of 20000 tokens \(configured\) less 2000 kept for the answer; it was not sent$/,
      );
      const counted = Number(/take (\d+) tokens/.exec(message)?.[1]);
      expect(counted).toBeGreaterThan(20_000);
      // One request went, the step that read the log; the next was never sent.
      expect(fake.requests).toHaveLength(1);
      expect(fake.requests.every((request) => (request.tokens ?? Infinity) <= 20_000)).toBe(true);
      expect(events.filter((event) => event.type === 'llm-request')).toHaveLength(1);
      expect(events.at(-1)).toMatchObject({ type: 'run-end', finishReason: 'error', error: { code: 'CONTEXT_OVERFLOW', message } });
    });
  }

  it("answers the provider's context_length_exceeded with one retry that drops the oldest tool result, and the run ends well", async () => {
    const pool = await logPool();
    // Klym takes gpt-4.1-mini's window to be 1,047,576 tokens; this provider's is 6,000.
    const fake = await fakeLlm([read(0, 100), read(100, 100), { kind: 'turn', text: 'Line 150 is a WARN.' }], 6_000);
    const events: AgentEvent[] = [];

    const run = await runAgent({
      pool,
      prompt: 'Read the log in pages of 100 lines and tell me the level of line 150.',
      ...gptOn(fake),
      onEvent: (event) => events.push(event),
    });

    expect(run).toMatchObject({ finishReason: 'stop', finalText: 'Line 150 is a WARN.', steps: 3 });
    const tokens = fake.requests.map((request) => request.tokens ?? 0);
    expect(tokens).toHaveLength(4);
    // The third request was refused as too long; the retry fitted, without the first page, with the second.
    expect(tokens[2]).toBeGreaterThan(6_000);
    expect(tokens[3]).toBeLessThanOrEqual(6_000);
    const retried = fake.requests[3]?.body ?? '';
    expect(retried).toContain(DROPPED_RESULT_NOTE.slice(1, 40));
    expect(retried).not.toContain(logLines(0, 1));
    expect(retried).toContain(logLines(100, 1));
    expect(events.filter((event) => event.type === 'context-shrunk')).toEqual([
      {
        type: 'context-shrunk',
        step: 3,
        droppedResults: 1,
        tokensBefore: tokens[2],
        tokens: expect.any(Number),
        window: 6_000,
        reason: 'the provider refused the request as longer than its context window',
      },
    ]);
    // The run's history keeps the dropped result: only what was sent lost it.
    expect(JSON.stringify(run.messages)).toContain(logLines(0, 1));
    // The refused request cost nothing: the usage is the three answered requests'.
    expect(run.usage.inputTokens).toBe((tokens[0] ?? 0) + (tokens[1] ?? 0) + (tokens[3] ?? 0));
  });

  it('a configured window makes a result over a tenth of it an artifact, so the request fits', async () => {
    const pool = await logPool();
    const fake = await fakeLlm([read(0, 1_000), { kind: 'turn', text: 'Read it as an artifact.' }], 20_000);
    const events: AgentEvent[] = [];

    const run = await runAgent({
      pool,
      prompt: 'Count the errors per service.',
      ...gptOn(fake),
      contextWindows: { 'openai:gpt-4.1-mini': 20_000 },
      onEvent: (event) => events.push(event),
    });

    expect(run.finalText).toBe('Read it as an artifact.');
    const [kept] = events.filter((event) => event.type === 'artifact-kept');
    // Counted with o200k_base, as the provider counts: the log's 1,000 lines take about 30,000 tokens.
    expect(kept?.type === 'artifact-kept' && kept.artifact.tokens).toBeGreaterThan(2_000);
    expect(fake.requests.map((request) => request.tokens ?? Infinity).every((tokens) => tokens < 4_000)).toBe(true);
  });

  it("a request refused again after its shrink, or that cannot be shrunk, ends the run with CONTEXT_OVERFLOW and the provider's error as its cause", async () => {
    const pool = await logPool();
    // A refusal without figures: Klym aims at three quarters of the request; refused again, it gives up.
    const tooLong = {
      kind: 'fail',
      status: 400,
      body: '{"error":{"message":"Input too long.","type":"invalid_request_error","code":"context_length_exceeded"}}',
    } as const;
    const fake = await fakeLlm([read(0, 100), read(100, 100), tooLong, tooLong], 1_000_000);
    const events: AgentEvent[] = [];

    const failure: unknown = await runAgent({
      pool,
      prompt: 'Read the log.',
      ...gptOn(fake),
      artifactThresholdTokens: 1_000_000,
      onEvent: (event) => events.push(event),
    }).catch((error: unknown) => error);

    expect(isKlymError(failure, 'CONTEXT_OVERFLOW')).toBe(true);
    expect((failure as Error).message).toMatch(
      /^The request to model openai:gpt-4\.1-mini would take \d+ tokens \(counted with o200k_base\), more than its context window of 1047576 tokens \(built-in\) less 16384 kept for the answer; the provider refused it, and dropping older tool results would not make it fit$/,
    );
    expect((failure as Error).cause).toMatchObject({ message: 'Input too long.' });
    const [shrink] = events.filter((event) => event.type === 'context-shrunk');
    expect(shrink).toMatchObject({ droppedResults: 1 });
    expect(shrink?.type === 'context-shrunk' && shrink.tokens / shrink.tokensBefore).toBeLessThanOrEqual(0.75);
    expect(fake.requests).toHaveLength(4);

    // The only tool result is the latest step's: nothing may be dropped, and nothing more is sent.
    const small = await fakeLlm([read(0, 100)], 2_000);
    const unshrinkable: unknown = await runAgent({
      pool,
      prompt: 'Read the log.',
      ...gptOn(small),
      artifactThresholdTokens: 1_000_000,
    }).catch((error: unknown) => error);
    expect(isKlymError(unshrinkable, 'CONTEXT_OVERFLOW')).toBe(true);
    expect((unshrinkable as Error).message).toMatch(
      /context window of 2000 tokens \(as the provider said\) less 200 kept for the answer; the provider refused it/,
    );
    expect(small.requests.map((request) => (request.tokens ?? 0) > 2_000)).toEqual([false, true]);
  });

  it('a task of the task service gets the configured windows, and fails with CONTEXT_OVERFLOW', async () => {
    const pool = await logPool();
    const fake = await fakeLlm([{ kind: 'turn', text: 'never asked' }], 20_000);
    const service = createTaskService({
      pool,
      models: ['openai:gpt-4.1-mini'],
      providers: { openai: { apiKey: KEY, baseURL: fake.openaiBaseUrl } },
      contextWindows: { 'gpt-4.1-mini': 20_000 },
    });
    cleanups.push(() => service.close());

    // A prompt is never an artifact: 1,000 lines of the log in it take about 30,000 tokens.
    const { task_id } = await service.start({ prompt: `Count the errors per service:\n${logLines(0, 1_000)}` }, 'grynya');

    await vi.waitFor(async () => expect((await service.status({ task_id }, 'grynya')).status).toBe('error'), { timeout: 10_000, interval: 20 });
    const status = await service.status({ task_id }, 'grynya');
    expect(status).toMatchObject({
      error: {
        code: 'CONTEXT_OVERFLOW',
        message: expect.stringMatching(/model openai:gpt-4\.1-mini would take \d+ tokens .* context window of 20000 tokens \(configured\)/),
      },
    });
    expect(fake.requests).toHaveLength(0);
  });
});
