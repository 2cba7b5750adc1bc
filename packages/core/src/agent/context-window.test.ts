import { APICallError, type ModelMessage } from 'ai';
import { describe, expect, it } from 'vitest';
import { isKlymError } from '../errors.ts';
import { answerReserve, artifactThreshold, contextLengthExceeded, contextWindowOf, createContextWindow, DROPPED_RESULT_NOTE } from './context-window.ts';
import type { TokenCounter } from './token-count.ts';

/** One token a character: the figures below can be worked out by hand. */
const chars: TokenCounter = { tokenizer: 'estimate', count: (text) => text.length };
const user = (text: string): ModelMessage => ({ role: 'user', content: text });
const call = (id: string): ModelMessage => ({ role: 'assistant', content: [{ type: 'tool-call', toolCallId: id, toolName: 't', input: {} }] });
const result = (id: string, text: string): ModelMessage => ({
  role: 'tool',
  content: [{ type: 'tool-result', toolCallId: id, toolName: 't', output: { type: 'text', value: text } }],
});
const windowOf = (model: string, contextWindows?: Record<string, number>) =>
  createContextWindow({ model, counter: chars, system: 'sys', tools: {}, ...(contextWindows === undefined ? {} : { contextWindows }) });

describe("a model's context window", () => {
  it("is configured (by provider:model, then id), else built in (a dated snapshot takes its model's), else a small default", () => {
    expect(contextWindowOf('openai:gpt-4.1-mini')).toEqual({ tokens: 1_047_576, source: 'built-in' });
    expect(contextWindowOf('openai:gpt-4o-mini-2024-07-18')).toEqual({ tokens: 128_000, source: 'built-in' });
    expect(contextWindowOf('openai:gpt-4o-2024-08-06')).toEqual({ tokens: 128_000, source: 'built-in' });
    expect(contextWindowOf('google:gemini-2.5-flash')).toEqual({ tokens: 1_048_576, source: 'built-in' });
    expect(contextWindowOf('openai:gpt-4.1-mini', { 'openai:gpt-4.1-mini': 20_000 })).toEqual({ tokens: 20_000, source: 'configured' });
    expect(contextWindowOf('compatible:llama3.1:8b', { 'llama3.1:8b': 131_072 })).toEqual({ tokens: 131_072, source: 'configured' });
    expect(contextWindowOf('compatible:llama3')).toEqual({ tokens: 32_768, source: 'default' });
    expect(contextWindowOf('openai:gpt-4.2')).toEqual({ tokens: 32_768, source: 'default' });
    expect(contextWindowOf('scripted').tokens).toBe(Number.POSITIVE_INFINITY);
    expect(contextWindowOf('scripted:script').tokens).toBe(Number.POSITIVE_INFINITY);
  });

  it("makes a tenth of the window the artifacts' threshold; the scripted model's is a tenth of 128,000", () => {
    expect(artifactThreshold('openai:gpt-4.1-mini')).toBe(104_757);
    expect(artifactThreshold('openai:gpt-4.1-mini', { 'gpt-4.1-mini': 20_000 })).toBe(2_000);
    expect(artifactThreshold('compatible:llama3')).toBe(3_276);
    expect(artifactThreshold('scripted')).toBe(12_800);
  });

  it('keeps a tenth of the window for the answer, at most 16,384 tokens', () => {
    expect(answerReserve(32_768)).toBe(3_277);
    expect(answerReserve(128_000)).toBe(12_800);
    expect(answerReserve(1_047_576)).toBe(16_384);
  });

  it('counts system prompt, tool definitions and messages; a request past the window less the reserve does not fit', () => {
    const window = windowOf('compatible:llama3', { llama3: 1_000 });
    // The system prompt is a message (3 around its role and text), and 3 prime the answer.
    expect(window.requestTokens([])).toBe(3 + 6 + 3 + 3);
    expect(window.fits([user('x'.repeat(800))])).toEqual({ fits: true, tokens: 15 + 3 + 4 + 800, limit: 900 });
    const over = window.fits([user('x'.repeat(900))]);
    expect(over.fits).toBe(false);
    const error = window.overflow(over.tokens);
    expect(isKlymError(error, 'CONTEXT_OVERFLOW')).toBe(true);
    expect(error.message).toBe(
      'The request to model compatible:llama3 would take 922 tokens (estimated), more than its context window of 1000 tokens (configured) less 100 kept for the answer; it was not sent',
    );
    expect(windowOf('compatible:mystery').overflow(40_000).message).toContain(
      "Klym's window for a model it does not know; set `llm.contextWindows` for compatible:mystery",
    );
  });

  it('corrects its count by the usage reported: the reported count plus what was added, scaled up only, never below what was reported', () => {
    const window = windowOf('compatible:llama3', { llama3: 100_000 });
    const first = [user('x'.repeat(1_000))];
    expect(window.requestTokens(first)).toBe(1_022);
    // The provider counted half: the next request is what it reported plus the count of what was added.
    window.reported(first, 511);
    const next = [...first, call('c1'), result('c1', 'y'.repeat(1_000))];
    const added = window.requestTokens(next) - 511;
    expect(added).toBe(3 + 9 + 6 + 2 + 1 + 2 + 3 + 4 + 6 + 2 + 1 + 1_000);
    // It counted double: what is added counts double too.
    window.reported(first, 2_044);
    expect(window.requestTokens(next)).toBe(2_044 + added * 2);
    // A request smaller than the one reported is scaled by the ratio.
    expect(window.requestTokens([user('x')])).toBe(2 * (15 + 3 + 4 + 1));
  });

  it("shrinks by dropping the oldest tool results from what is sent, never the latest step's nor the user's", () => {
    const window = windowOf('compatible:llama3', { llama3: 10_000 });
    const messages = [
      user('task'),
      call('a'),
      result('a', 'A'.repeat(3_000)),
      call('b'),
      result('b', 'B'.repeat(3_000)),
      call('c'),
      result('c', 'C'.repeat(3_000)),
    ];
    expect(window.fits(messages).fits).toBe(false);
    const shrunk = window.shrink(messages);
    expect(shrunk?.dropped).toBe(1);
    const sent = window.sendable(messages);
    expect(JSON.stringify(sent)).not.toContain('AAA');
    expect(JSON.stringify(sent)).toContain(DROPPED_RESULT_NOTE);
    expect(JSON.stringify(sent)).toContain('CCC');
    expect(window.fits(messages)).toMatchObject({ fits: true, tokens: shrunk?.tokens });
    // The input is not changed, and the same dropped results are dropped from every later request.
    expect(JSON.stringify(messages)).toContain('AAA');
    expect(window.sendable([...messages, call('d')])[2]).toBe(sent[2]);
    // A later shrink may drop another result of a message already sent without one.
    const pair = [
      user('task'),
      call('x'),
      { role: 'tool', content: [...(result('x', 'X'.repeat(3_000)).content as []), ...(result('y', 'Y'.repeat(3_000)).content as [])] } as ModelMessage,
      call('z'),
      result('z', 'Z'),
    ];
    expect(window.shrink(pair, 5_000)?.dropped).toBe(1);
    expect(JSON.stringify(window.sendable(pair)[2])).toContain('YYY');
    expect(window.shrink(pair, 1_000)?.dropped).toBe(1);
    expect(JSON.stringify(window.sendable(pair)[2])).not.toMatch(/XXX|YYY/);
    // When even every older result would not do, nothing is dropped.
    const huge = [user('task'), call('p'), result('p', 'P'.repeat(100)), call('q'), result('q', 'Q'.repeat(20_000))];
    expect(window.shrink(huge)).toBeUndefined();
    expect(window.sendable(huge)[2]).toBe(huge[2]);
  });

  it('learns the window a provider gives when it refuses a request as too long', () => {
    const window = windowOf('openai:gpt-4.1-mini');
    const messages = [user('x'.repeat(10_000))];
    window.refused(messages, { window: 8_000, tokens: 12_000 });
    expect(window.window).toBe(8_000);
    expect(window.source).toBe('provider');
    expect(window.overflow(12_000, new Error('refused')).message).toBe(
      'The request to model openai:gpt-4.1-mini would take 12000 tokens (estimated), more than its context window of 8000 tokens (as the provider said) less 800 kept for the answer; the provider refused it, and dropping older tool results would not make it fit',
    );
    expect(window.reserve).toBe(800);
    expect(window.fits(messages)).toMatchObject({ fits: false, tokens: 12_000 });
  });

  it('the scripted model has no window: nothing is counted, everything fits', () => {
    const window = windowOf('scripted');
    expect(window.fits([user('x'.repeat(10_000_000))])).toEqual({ fits: true, tokens: 0, limit: Number.POSITIVE_INFINITY });
  });
});

const apiError = (statusCode: number, responseBody: string, message = 'Bad Request'): APICallError =>
  new APICallError({ message, url: 'http://x/v1/responses', requestBodyValues: {}, statusCode, responseBody, isRetryable: false });

describe('contextLengthExceeded', () => {
  it("reads OpenAI's context_length_exceeded and Gemini's token count error, with their figures", () => {
    const openai = JSON.stringify({
      error: {
        message:
          "This model's maximum context length is 6000 tokens. However, your messages resulted in 6388 tokens. Please reduce the length of the messages.",
        type: 'invalid_request_error',
        param: 'messages',
        code: 'context_length_exceeded',
      },
    });
    expect(contextLengthExceeded(apiError(400, openai))).toEqual({ window: 6_000, tokens: 6_388 });
    const gemini = JSON.stringify({
      error: { code: 400, message: 'The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).', status: 'INVALID_ARGUMENT' },
    });
    expect(contextLengthExceeded(apiError(400, gemini))).toEqual({ window: 1_048_576, tokens: 1_200_000 });
    expect(contextLengthExceeded(apiError(400, '{"error":{"code":"context_length_exceeded","message":"too long"}}'))).toEqual({});
    // Wrapped by the SDK's retries.
    expect(contextLengthExceeded(Object.assign(new Error('Failed after 3 attempts'), { lastError: apiError(400, openai) }))).toMatchObject({ window: 6_000 });
  });

  it('is undefined for any other failure', () => {
    expect(contextLengthExceeded(apiError(400, '{"error":{"message":"Invalid schema for function"}}'))).toBeUndefined();
    expect(contextLengthExceeded(apiError(500, '{"error":{"message":"maximum context length is 6000 tokens"}}'))).toBeUndefined();
    expect(contextLengthExceeded(new Error('socket hang up'))).toBeUndefined();
    expect(contextLengthExceeded(undefined)).toBeUndefined();
  });
});
