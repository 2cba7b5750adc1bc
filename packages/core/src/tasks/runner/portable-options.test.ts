import { describe, expect, it } from 'vitest';
import { threadShares } from './portable-options.ts';

describe('threadShares', () => {
  it("divides each upstream's pool.max between the threads, the remainder to the first, at least 1 each, and pool.min at most a share", () => {
    const shares = threadShares(
      {
        http: { url: 'http://127.0.0.1:1/mcp', pool: { min: 2, max: 4 } },
        stdio: { command: 'server' },
        plenty: { url: 'http://127.0.0.1:1/mcp', pool: { max: 9, maxWaiting: 5 } },
      },
      3,
    );

    expect(shares.map((share) => share.http?.pool)).toEqual([
      { min: 2, max: 2 },
      { min: 1, max: 1 },
      { min: 1, max: 1 },
    ]);
    // A stdio upstream's one session becomes one per thread: each thread's pool needs one.
    expect(shares.map((share) => share.stdio?.pool?.max)).toEqual([1, 1, 1]);
    expect(shares.map((share) => share.plenty?.pool)).toEqual(Array.from({ length: 3 }, () => ({ min: 1, max: 3, maxWaiting: 5 })));
    expect(shares[0]?.http).toMatchObject({ url: 'http://127.0.0.1:1/mcp' });
  });
});
