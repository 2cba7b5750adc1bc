// The fake OpenAI endpoint's delayed replies, which the benchmarks use as a model that takes its time.
import { describe, expect, it, vi } from 'vitest';
import { startFakeLlmServer } from './fake-llm-server.ts';

const ask = (baseUrl: string, signal?: AbortSignal): Promise<string> =>
  fetch(`${baseUrl}/chat/completions`, { method: 'POST', body: '{}', ...(signal === undefined ? {} : { signal }) }).then((response) => response.text());

describe('startFakeLlmServer with delayMs', () => {
  it('answers a delayed reply after a later request without a delay', async () => {
    await using llm = await startFakeLlmServer([
      { kind: 'turn', text: 'slow', delayMs: 300 },
      { kind: 'turn', text: 'fast' },
    ]);
    const order: string[] = [];
    const slow = ask(llm.openaiBaseUrl).then((body) => order.push(body.includes('slow') ? 'slow' : body));
    await vi.waitFor(() => expect(llm.requests).toHaveLength(1));
    await ask(llm.openaiBaseUrl).then((body) => order.push(body.includes('fast') ? 'fast' : body));
    await slow;
    expect(order).toEqual(['fast', 'slow']);
  });

  it('keeps serving when a client goes away during a delay, and closes with a reply still delayed', async () => {
    const llm = await startFakeLlmServer([
      { kind: 'turn', text: 'never read', delayMs: 100 },
      // Answered after the first reply's delay is over: by then a write to the client that left would have failed.
      { kind: 'turn', text: 'next', delayMs: 200 },
      { kind: 'turn', text: 'pending at close', delayMs: 60_000 },
    ]);
    const leaving = new AbortController();
    const left = ask(llm.openaiBaseUrl, leaving.signal).catch((error: unknown) => error);
    await vi.waitFor(() => expect(llm.requests).toHaveLength(1));
    leaving.abort();
    expect(await left).toBeInstanceOf(Error);
    expect(await ask(llm.openaiBaseUrl)).toContain('next');
    const pending = ask(llm.openaiBaseUrl).catch((error: unknown) => error);
    await vi.waitFor(() => expect(llm.requests).toHaveLength(3));
    await llm.close();
    expect(await pending).toBeInstanceOf(Error);
  });
});

const post = (url: string, body: unknown): Promise<Response> => fetch(url, { method: 'POST', body: JSON.stringify(body) });

describe('startFakeLlmServer with a contextWindow', () => {
  it("answers a request over its window 400 with OpenAI's context_length_exceeded, on both APIs, and reports its count as usage below it", async () => {
    await using llm = await startFakeLlmServer([{ kind: 'turn', text: 'fits' }], { contextWindow: 50 });
    const long = 'word '.repeat(100);
    for (const [path, body] of [
      ['/chat/completions', { messages: [{ role: 'user', content: long }] }],
      ['/responses', { input: [{ role: 'user', content: [{ type: 'input_text', text: long }] }] }],
    ] as const) {
      const response = await post(`${llm.openaiBaseUrl}${path}`, body);
      expect(response.status).toBe(400);
      expect(await response.json()).toEqual({
        error: {
          message: "This model's maximum context length is 50 tokens. However, your messages resulted in 108 tokens. Please reduce the length of the messages.",
          type: 'invalid_request_error',
          param: 'messages',
          code: 'context_length_exceeded',
        },
      });
    }
    // 3 to prime the answer, 3 for the message, 1 for its role, 2 for its text.
    const fits = await post(`${llm.openaiBaseUrl}/chat/completions`, { messages: [{ role: 'user', content: 'hello world' }] });
    expect(await fits.text()).toContain('"prompt_tokens":9');
    expect(llm.requests.map((request) => request.tokens)).toEqual([108, 108, 9]);
  });
});
