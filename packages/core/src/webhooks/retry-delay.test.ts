import * as fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { retryDelay } from './retry-delay.ts';

describe('retryDelay', () => {
  it('doubles from retryDelayMs up to maxRetryDelayMs, keeping between half of it and all of it', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 200 }),
        fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }),
        fc.integer({ min: 1, max: 60_000 }),
        fc.integer({ min: 1, max: 100 }),
        (attempt, random, retryDelayMs, factor) => {
          const maxRetryDelayMs = retryDelayMs * factor;
          const ceiling = Math.min(maxRetryDelayMs, retryDelayMs * 2 ** (attempt - 1));
          const delay = retryDelay(attempt, { retryDelayMs, maxRetryDelayMs }, () => random);
          expect(delay).toBeGreaterThanOrEqual(Math.floor(ceiling / 2));
          expect(delay).toBeLessThanOrEqual(ceiling);
        },
      ),
    );
  });

  it('spreads retries of the same attempt across its range', () => {
    const delays = { retryDelayMs: 5_000, maxRetryDelayMs: 3_600_000 };
    expect([0, 0.5, 0.999_999].map((random) => retryDelay(1, delays, () => random))).toEqual([2_500, 3_750, 5_000]);
    expect([0, 0.999_999].map((random) => retryDelay(4, delays, () => random))).toEqual([20_000, 40_000]);
    // Far past the cap the exponent stops growing: never Infinity, never past the cap.
    expect([0, 0.999_999].map((random) => retryDelay(10_000, delays, () => random))).toEqual([1_800_000, 3_599_998]);
  });
});
