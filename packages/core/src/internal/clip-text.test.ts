import { describe, expect, it } from 'vitest';
import { clipText } from './clip-text.ts';

describe('clipText', () => {
  it('leaves a text that fits as it is, and cuts a longer one to the limit with an ellipsis', () => {
    expect(clipText('short', 5)).toBe('short');
    expect(clipText('x'.repeat(500), 400)).toBe(`${'x'.repeat(399)}…`);
    expect(clipText('Бачу базу'.repeat(100), 400)).toHaveLength(400);
  });

  it('counts what JSON escapes: a text of quotes and control characters stays within the limit as JSON', () => {
    for (const text of ['"'.repeat(1_000), '\n'.repeat(1_000), '\u0001'.repeat(1_000), '\\"\u0002é'.repeat(300)]) {
      const clipped = clipText(text, 100);
      expect(JSON.stringify(clipped).length - 2).toBeLessThanOrEqual(100);
      expect(clipped.endsWith('…')).toBe(true);
      expect(clipped.length).toBeGreaterThan(15);
    }
  });

  it('never splits a surrogate pair', () => {
    const clipped = clipText('😀'.repeat(100), 11);
    expect(clipped).toBe(`${'😀'.repeat(5)}…`);
    expect(JSON.stringify(clipped)).not.toMatch(/\\ud/);
  });
});
