import { describe, expect, it } from 'vitest';
import { createRedactor } from './redact.ts';

/** A usage as events carry it, with `value` where a count should be, and a key that is a secret. */
const usage = (value: unknown) => ({ inputTokens: 10, outputTokens: value, totalTokens: 12, estimated: false, costUsd: 0.5, 'tok-upstream-secret': true });

describe('createRedactor', () => {
  it('removes given secrets everywhere in a value, keys included, leaving the input alone', () => {
    const redactor = createRedactor(['hunter2-secret', undefined, 'abc']);
    const input = { message: 'key hunter2-secret failed', list: ['x hunter2-secret'], nested: { 'hunter2-secret': 1 }, short: 'abc' };
    expect(redactor.value(input)).toEqual({ message: 'key [redacted] failed', list: ['x [redacted]'], nested: { '[redacted]': 1 }, short: 'abc' });
    expect(input.message).toBe('key hunter2-secret failed');
  });

  it('keeps a key `__proto__` as a key, redacted, without changing what the copy is', () => {
    const redactor = createRedactor(['hunter2-secret']);
    // What a model's tool arguments can hold once JSON.parse made them an object.
    const input = JSON.parse('{"__proto__": {"polluted": "hunter2-secret"}, "query": "RETURN 1"}') as Record<string, unknown>;
    const copy = redactor.value(input);
    expect(Object.getPrototypeOf(copy)).toBe(Object.prototype);
    expect((copy as { polluted?: unknown }).polluted).toBeUndefined();
    expect(Object.keys(copy)).toEqual(['__proto__', 'query']);
    expect(JSON.stringify(copy)).toBe('{"__proto__":{"polluted":"[redacted]"},"query":"RETURN 1"}');
  });

  it('removes secret-shaped text nobody named', () => {
    const redactor = createRedactor();
    expect(redactor.text('Authorization: Bearer eyJhbGciOi.payload.sig')).not.toContain('eyJhbGciOi');
    expect(redactor.text('authorization: token ghp_abcdef1234567890')).toBe('authorization: token [redacted]');
    expect(redactor.text('the authorization step failed')).toBe('the authorization step failed');
    expect(redactor.text('http://user:pa55word@host:8080/v1')).toBe('http://[redacted]@host:8080/v1');
    expect(redactor.text('fetch https://ghp_abcdef1234567890@mcp.example.com/sse failed')).toBe('fetch https://[redacted]@mcp.example.com/sse failed');
    expect(redactor.text('GET /v1?api_key=12345678&x=1')).toBe('GET /v1?api_key=[redacted]&x=1');
    expect(redactor.text('key sk-proj-abcdefghijklmnopqrstuv')).toBe('key [redacted]');
    expect(redactor.text('{"inputTokens":10,"totalTokens":12}')).toBe('{"inputTokens":10,"totalTokens":12}');
  });

  it('copies errors as name and redacted message, and survives cycles', () => {
    const redactor = createRedactor(['top-secret-value']);
    const error = Object.assign(new Error('failed with top-secret-value'), { responseBody: 'top-secret-value' });
    const copy = redactor.value(error);
    expect(copy).toBeInstanceOf(Error);
    expect(copy.message).toBe('failed with [redacted]');
    expect(JSON.stringify(copy)).not.toContain('top-secret-value');
    const cyclic: Record<string, unknown> = { name: 'top-secret-value' };
    cyclic.self = cyclic;
    const redacted = redactor.value(cyclic);
    expect(redacted.name).toBe('[redacted]');
    expect(redacted.self).toBe(redacted);
  });

  it('redacts usage-like objects and number-like strings like any other: a key seen before or a digit string is no way around it', () => {
    const redactor = createRedactor(['12345678', 'tok-upstream-secret']);
    for (let round = 0; round < 3; round++) {
      expect(redactor.value({ usage: usage('tok-upstream-secret') })).toEqual({
        usage: { inputTokens: 10, outputTokens: '[redacted]', totalTokens: 12, estimated: false, costUsd: 0.5, '[redacted]': true },
      });
      expect(redactor.value(usage('12345678'))).toMatchObject({ outputTokens: '[redacted]' });
      expect(redactor.value(usage('token=abcdef123456'))).toMatchObject({ outputTokens: 'token=[redacted]' });
    }
    expect(redactor.value(['12345678', 12345678, true, null])).toEqual(['[redacted]', 12345678, true, null]);
    expect(redactor.value('a call with 12345678 in it')).toBe('a call with [redacted] in it');
    expect(redactor.value(42)).toBe(42);
  });

  it('keeps redacting keys once it has seen more distinct ones than it remembers', () => {
    const redactor = createRedactor(['hunter2-secret']);
    const many = Object.fromEntries(Array.from({ length: 2_000 }, (_, index) => [`key-${index}-hunter2-secret`, index]));
    const redacted = redactor.value(many);
    expect(Object.keys(redacted)).toHaveLength(2_000);
    expect(JSON.stringify(redacted)).not.toContain('hunter2-secret');
    expect(redactor.value({ 'Bearer abcdefghijkl': 1 })).toEqual({ 'Bearer [redacted]': 1 });
  });
});
