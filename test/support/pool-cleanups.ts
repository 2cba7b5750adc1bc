import { createSessionPool, type SessionPool } from '@klym/core';
import { afterEach } from 'vitest';

/** What a test file opened, closed after each test in reverse order, and a pool opened among them. */
export interface TestCleanups {
  /** Closes a resource after the test; the last one added is closed first. */
  add(cleanup: () => Promise<unknown>): void;
  /** A pool closed after the test (with a short drain), started and warmed up. */
  pooled(options: Parameters<typeof createSessionPool>[0]): Promise<SessionPool>;
}

/** Registers the `afterEach` that runs a test's cleanups; call it once at the top of a test file. */
export function useCleanups(): TestCleanups {
  const cleanups: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).toReversed()) await cleanup();
  });
  return {
    add: (cleanup) => void cleanups.push(cleanup),
    async pooled(options) {
      const pool = await createSessionPool(options);
      cleanups.push(() => pool.close({ drainTimeoutMs: 100 }));
      await pool.warmedUp();
      return pool;
    },
  };
}
