import { describe, expect, it } from 'vitest';
import { threadCount, threadShares } from './portable-options.ts';

describe('threadCount', () => {
  it("starts no more threads than a stdio upstream's one session allows, naming it", () => {
    const upstreams = { memory: { command: 'server-memory' } };

    expect(threadCount(upstreams, 3)).toEqual({ count: 1, cappedBy: { upstream: 'memory', max: 1 } });
    // Its one session, on that one thread: the total stays 1.
    expect(threadShares(upstreams, threadCount(upstreams, 3).count).map((share) => share.memory?.pool?.max)).toEqual([1]);
  });

  it('starts the threads asked for when every pool.max allows them: 3 sessions over 2 threads are 2 + 1', () => {
    const upstreams = { http: { url: 'http://127.0.0.1:1/mcp', pool: { max: 3 } } };

    expect(threadCount(upstreams, 2)).toEqual({ count: 2 });
    expect(threadShares(upstreams, 2).map((share) => share.http?.pool?.max)).toEqual([2, 1]);
  });

  it('takes the smallest pool.max among mixed upstreams, and names that upstream', () => {
    const upstreams = {
      wide: { url: 'http://127.0.0.1:1/mcp', pool: { max: 9 } },
      http: { url: 'http://127.0.0.1:1/mcp' },
      narrow: { url: 'http://127.0.0.1:1/mcp', pool: { max: 2 } },
      stdio: { command: 'server', pool: { max: 3 } },
    };

    expect(threadCount(upstreams, 8)).toEqual({ count: 2, cappedBy: { upstream: 'narrow', max: 2 } });
    expect(threadCount(upstreams, 2)).toEqual({ count: 2 });
    expect(threadCount({}, 5)).toEqual({ count: 5 });
  });
});

describe('threadShares', () => {
  it("divides each upstream's pool.max between the threads, the remainder to the first, and pool.min at most a share", () => {
    const shares = threadShares(
      {
        http: { url: 'http://127.0.0.1:1/mcp', pool: { min: 2, max: 4 } },
        plenty: { url: 'http://127.0.0.1:1/mcp', pool: { max: 9, maxWaiting: 5 } },
      },
      3,
    );

    expect(shares.map((share) => share.http?.pool)).toEqual([
      { min: 2, max: 2 },
      { min: 1, max: 1 },
      { min: 1, max: 1 },
    ]);
    expect(shares.map((share) => share.plenty?.pool)).toEqual(Array.from({ length: 3 }, () => ({ min: 1, max: 3, maxWaiting: 5 })));
    expect(shares[0]?.http).toMatchObject({ url: 'http://127.0.0.1:1/mcp' });
  });
});
