import { createSessionPool, isKlymError, runAgent, type SessionPool } from '@klym/core';
import { createFakeGrynya, pythonJsonDumps, type FakeGrynya } from '@klym/fake-grynya';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startFakeLlmServer, type FakeLlmServer, type FakeReply } from './support/fake-llm-server.ts';

let grynya: FakeGrynya;
let pool: SessionPool;
const fakes: FakeLlmServer[] = [];
beforeEach(async () => {
  grynya = await createFakeGrynya();
  grynya.graph.mergeNode('Person', { id: 'p1', name: 'Ada' });
  pool = await createSessionPool({ upstreams: { grynya: { url: grynya.sseUrl, transport: 'sse' } } });
});
afterEach(async () => {
  await pool.close();
  await grynya.close();
  await Promise.all(fakes.splice(0).map((fake) => fake.close()));
});

async function fakeLlm(replies: FakeReply[]): Promise<FakeLlmServer> {
  const fake = await startFakeLlmServer(replies);
  fakes.push(fake);
  return fake;
}

const KEY = 'sk-test-0123456789abcdef';
const countCall = { name: 'grynya__query_graph', args: { query: 'MATCH (n) RETURN count(n)' } };
const roundTrip: FakeReply[] = [
  { kind: 'turn', toolCalls: [countCall], usage: { input: 100, output: 20 } },
  { kind: 'turn', text: 'There is one node.', usage: { input: 200, output: 10 } },
];
const countResult = pythonJsonDumps({ status: 'success', results: [{ 'count(n)': 1 }] });

describe('the real @ai-sdk/openai provider against a local fake of the OpenAI API', () => {
  it('Responses API (POST /v1/responses, streamed): a 429 with retry-after-ms is retried, then a tool round trip', async () => {
    const fake = await fakeLlm([
      { kind: 'fail', status: 429, headers: { 'retry-after-ms': '10' }, body: '{"error":{"message":"Rate limit reached"}}' },
      ...roundTrip,
    ]);

    const run = await runAgent({
      pool,
      prompt: 'How many nodes?',
      model: 'openai:gpt-4.1-mini',
      providers: { openai: { apiKey: KEY, baseURL: fake.openaiBaseUrl } },
    });

    expect(run).toMatchObject({ text: 'There is one node.', finishReason: 'stop', steps: 2, model: 'openai:gpt-4.1-mini' });
    expect(fake.requests.map((request) => request.path)).toEqual(['/v1/responses', '/v1/responses', '/v1/responses']);
    expect(fake.requests[0]?.headers.authorization).toBe(`Bearer ${KEY}`);
    const first = fake.requests[1]?.json as { stream: boolean; model: string; tools: { name: string }[] };
    expect(first).toMatchObject({ stream: true, model: 'gpt-4.1-mini' });
    expect(first.tools.map((tool) => tool.name)).toContain('grynya__query_graph');
    expect(fake.requests[2]?.body).toContain('function_call_output');
    expect(fake.requests[2]?.body).toContain(JSON.stringify(countResult).slice(1, -1));
    expect(run.usage).toEqual({ inputTokens: 300, outputTokens: 30, totalTokens: 330, estimated: false });
    // gpt-4.1-mini is in the default price table: $0.40 in, $1.60 out per million.
    expect(run.costUsd).toBeCloseTo((300 * 0.4 + 30 * 1.6) / 1_000_000, 12);
    expect(grynya.stats.calls.query_graph).toBe(1);
  });

  it('Chat Completions (POST /v1/chat/completions, streamed): the same round trip', async () => {
    const fake = await fakeLlm([{ kind: 'fail', status: 429, headers: { 'retry-after-ms': '10' }, body: '{"error":{"message":"slow down"}}' }, ...roundTrip]);

    const run = await runAgent({
      pool,
      prompt: 'How many nodes?',
      model: 'openai:gpt-4.1-mini',
      providers: { openai: { apiKey: KEY, baseURL: fake.openaiBaseUrl, api: 'chat' } },
    });

    expect(run).toMatchObject({ text: 'There is one node.', finishReason: 'stop', steps: 2 });
    expect(fake.requests.map((request) => request.path)).toEqual(['/v1/chat/completions', '/v1/chat/completions', '/v1/chat/completions']);
    expect(fake.requests[1]?.json).toMatchObject({ stream: true, stream_options: { include_usage: true } });
    const messages = (fake.requests[2]?.json as { messages: { role: string; content: string }[] } | undefined)?.messages ?? [];
    expect(messages.find((message) => message.role === 'tool')?.content).toBe(countResult);
    expect(run.usage).toMatchObject({ totalTokens: 330, estimated: false });
  });

  it('repeated 500s end in a clear MODEL_ERROR after maxRetries + 1 attempts', async () => {
    const failure: FakeReply = { kind: 'fail', status: 500, headers: { 'retry-after-ms': '5' }, body: '{"error":{"message":"The server had an error"}}' };
    const fake = await fakeLlm([failure, failure, failure, failure]);

    const error = await runAgent({
      pool,
      prompt: 'Hi',
      model: 'openai:gpt-4.1-mini',
      maxRetries: 2,
      providers: { openai: { apiKey: KEY, baseURL: fake.openaiBaseUrl } },
    }).catch((thrown: unknown) => thrown);

    expect(isKlymError(error, 'MODEL_ERROR')).toBe(true);
    expect((error as Error).message).toMatch(/^Model openai:gpt-4\.1-mini failed: Failed after 3 attempts\. Last error: The server had an error \(HTTP 500\)$/);
    expect(fake.requests).toHaveLength(3);
  });

  it('no retry after an abort: a request cut off by the signal is not sent again', async () => {
    const fake = await fakeLlm([{ kind: 'hang' }, ...roundTrip]);
    const controller = new AbortController();
    const watch = setInterval(() => {
      if (fake.requests.length > 0) controller.abort();
    }, 5);

    const run = await runAgent({
      pool,
      prompt: 'Hi',
      model: 'openai:gpt-4.1-mini',
      signal: controller.signal,
      providers: { openai: { apiKey: KEY, baseURL: fake.openaiBaseUrl } },
    }).finally(() => clearInterval(watch));

    expect(run.finishReason).toBe('cancelled');
    expect(fake.requests).toHaveLength(1);
  });

  it('any OpenAI-compatible endpoint by base URL (Ollama, vLLM, LM Studio), named compatible:<model> or bare', async () => {
    const fake = await fakeLlm([...roundTrip]);

    const run = await runAgent({ pool, prompt: 'How many nodes?', model: 'llama3.1', providers: { compatible: { baseURL: fake.openaiBaseUrl } } });

    expect(run).toMatchObject({ model: 'compatible:llama3.1', text: 'There is one node.', costUsd: undefined });
    expect(fake.requests.map((request) => request.path)).toEqual(['/v1/chat/completions', '/v1/chat/completions']);
    expect(fake.requests[0]?.json).toMatchObject({ model: 'llama3.1' });
  });
});

describe('the real @ai-sdk/google provider against a local fake of streamGenerateContent', () => {
  it('one tool round trip', async () => {
    const fake = await fakeLlm([...roundTrip]);

    const run = await runAgent({
      pool,
      prompt: 'How many nodes?',
      model: 'gemini-2.5-flash',
      providers: { google: { apiKey: 'google-test-key-123', baseURL: fake.googleBaseUrl } },
    });

    expect(run).toMatchObject({ text: 'There is one node.', finishReason: 'stop', steps: 2, model: 'google:gemini-2.5-flash' });
    expect(fake.requests.map((request) => request.path)).toEqual([
      '/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse',
      '/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse',
    ]);
    expect(fake.requests[0]?.headers['x-goog-api-key']).toBe('google-test-key-123');
    const declarations = (fake.requests[0]?.json as { tools: { functionDeclarations: { name: string }[] }[] } | undefined)?.tools[0]?.functionDeclarations;
    expect(declarations?.map((declaration) => declaration.name)).toContain('grynya__query_graph');
    const contents =
      (fake.requests[1]?.json as { contents: { role: string; parts: { functionResponse?: { name: string; response: unknown } }[] }[] } | undefined)?.contents ??
      [];
    const response = contents.flatMap((content) => content.parts).find((part) => part.functionResponse !== undefined)?.functionResponse;
    expect(response?.name).toBe('grynya__query_graph');
    expect(JSON.stringify(response?.response)).toContain('count(n)');
    expect(run.usage).toEqual({ inputTokens: 300, outputTokens: 30, totalTokens: 330, estimated: false });
  });
});
