import { describe, expect, it } from 'vitest';
import { createRedactor } from './redact.ts';

describe('createRedactor', () => {
  it('removes given secrets everywhere in a value, keys included, leaving the input alone', () => {
    const redactor = createRedactor(['hunter2-secret', undefined, 'abc']);
    const input = { message: 'key hunter2-secret failed', list: ['x hunter2-secret'], nested: { 'hunter2-secret': 1 }, short: 'abc' };
    expect(redactor.value(input)).toEqual({ message: 'key [redacted] failed', list: ['x [redacted]'], nested: { '[redacted]': 1 }, short: 'abc' });
    expect(input.message).toBe('key hunter2-secret failed');
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
});
