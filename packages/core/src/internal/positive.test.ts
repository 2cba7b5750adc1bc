import { describe, expect, it } from 'vitest';
import { positiveInteger, positiveNumber } from './positive.ts';

describe('positiveInteger', () => {
  it('returns a positive integer and refuses the rest, naming the option and the value as given', () => {
    expect(positiveInteger('limit', 3)).toBe(3);
    expect(() => positiveInteger('limit', 0)).toThrow(
      expect.objectContaining({ code: 'CONFIG_INVALID', message: 'Expected `limit` to be a positive integer, got 0' }),
    );
    expect(() => positiveInteger('limit', 1.5, 'INVALID_ARGUMENT')).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
    expect(() => positiveInteger('limit', Number.NaN)).toThrow('got NaN');
    expect(() => positiveInteger('limit', '5' as unknown as number)).toThrow('Expected `limit` to be a positive integer, got "5"');
    expect(() => positiveInteger('timeoutMs', 11, 'CONFIG_INVALID', 10)).toThrow('Expected `timeoutMs` to be a positive integer of at most 10, got 11');
    expect(() => positiveInteger('limit', 2 ** 60)).toThrow('positive integer');
  });
});

describe('positiveNumber', () => {
  it('takes a fraction and refuses zero, a negative and what is not finite', () => {
    expect(positiveNumber('ttlMs', 0.5)).toBe(0.5);
    for (const value of [0, -1, Number.POSITIVE_INFINITY])
      expect(() => positiveNumber('ttlMs', value)).toThrow(`Expected \`ttlMs\` to be a positive number, got ${value}`);
  });
});
