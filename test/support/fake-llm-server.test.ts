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
