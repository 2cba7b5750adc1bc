import type { ModelMessage } from 'ai';
import { describe, expect, it } from 'vitest';
import { createTokenCounter, estimateTokens, messageTokens, tokenizerOf } from './token-count.ts';

/** Texts of the kinds a run sends: prose in English and Ukrainian, JSON, code, logs, hex ids, emoji and CJK. */
const SAMPLES = {
  english: 'The quick brown fox jumps over the lazy dog. Klym takes the heavy jobs Grynya cannot hold in its context window.',
  ukrainian: 'Бачу базу та інструменти, полет нормальний. Гриня розмовляє з людиною і працює з графом знань.',
  json: JSON.stringify({ status: 'success', results: [{ 'count(n)': 1234, name: 'Ada Lovelace', id: 'p1' }] }),
  code: 'function add(a, b) {\n  return a + b;\n}\n\nconst total = [1, 2, 3].reduce(add, 0);',
  log: '2026-11-25T03:14:15.926Z svc-7 ERROR code=5312 id=8f3a request failed\n2026-11-25T03:14:16.001Z svc-2 WARN code=5001 id=1b2c retrying',
  hex: 'id=8f3a9b2c4d5e6f708192a3b4c5d6e7f8 sha=0123456789abcdef0123456789abcdef',
  symbols: 'Готово ✅ 🚀 — 日本語のテキストも数えます',
};

/** One token a character, to work the overheads out by hand. */
const count = (text: string): number => text.length;

describe('token counting', () => {
  it('counts the OpenAI models of o200k_base with it, and estimates every other model', () => {
    for (const model of ['openai:gpt-4.1-mini', 'openai:gpt-4o', 'openai:gpt-5-nano', 'openai:o4-mini', 'openai:gpt-4.1-mini-2025-04-14'])
      expect(tokenizerOf(model)).toBe('o200k_base');
    for (const model of ['google:gemini-2.5-flash', 'compatible:llama3', 'openai:gpt-3.5-turbo', 'mock-provider:mock-model-id'])
      expect(tokenizerOf(model)).toBe('estimate');
  });

  it('counts with the real tokenizer, special tokens as plain text', async () => {
    const counter = await createTokenCounter('openai:gpt-4.1-mini');
    expect(counter.tokenizer).toBe('o200k_base');
    expect(counter.count('hello world')).toBe(2);
    expect(counter.count('')).toBe(0);
    // By default the tokenizer throws on it; a tool result may well hold it.
    expect(counter.count('end <|endoftext|> here')).toBeGreaterThan(3);
    expect(counter.count(SAMPLES.log)).toBe(63);
  });

  it('estimates never below o200k_base, and logs well above characters ÷ 4', async () => {
    const o200k = await createTokenCounter('openai:gpt-4o');
    for (const [kind, text] of Object.entries(SAMPLES)) {
      expect({ kind, estimate: estimateTokens(text) >= o200k.count(text) }).toEqual({ kind, estimate: true });
    }
    expect(estimateTokens(SAMPLES.log)).toBeGreaterThan(SAMPLES.log.length / 2.5);
    // Each digit is a token (Gemini splits numbers into digits); a single space joins the word after it.
    expect(estimateTokens('12345')).toBe(5);
    expect(estimateTokens('read the log')).toBe(3);
    expect(estimateTokens('a\n\n  b')).toBe(3);
    expect((await createTokenCounter('google:gemini-2.5-flash')).count('12345')).toBe(5);
  });

  it('counts the scripted model, which has no tokens, at 2.5 characters a token', async () => {
    const scripted = await createTokenCounter('scripted');
    expect(scripted.tokenizer).toBe('characters');
    expect(scripted.count('x'.repeat(1_000))).toBe(400);
    // A scripted model given as a model (`createScriptedModel({ steps })`) is named so.
    expect(tokenizerOf('scripted:script')).toBe('characters');
  });

  it('counts a message by what the model reads: texts, tool calls and results, a file as a fixed cost', () => {
    const result: ModelMessage = {
      role: 'tool',
      content: [{ type: 'tool-result', toolCallId: 'c1', toolName: 't', output: { type: 'text', value: 'x'.repeat(1_000) } }],
    };
    expect(messageTokens(result, count)).toBe(3 + 4 + 6 + 2 + 1 + 1_000);
    const call: ModelMessage = { role: 'assistant', content: [{ type: 'tool-call', toolCallId: 'c1', toolName: 't', input: { a: 1 } }] };
    expect(messageTokens(call, count)).toBe(3 + 9 + 6 + 2 + 1 + 7);
    const image: ModelMessage = { role: 'user', content: [{ type: 'image', image: 'A'.repeat(100_000) }] };
    expect(messageTokens(image, count)).toBe(3 + 4 + 1_600);
  });
});
