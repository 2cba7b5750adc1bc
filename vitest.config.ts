import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  resolve: { conditions: ['klym-source'] },
  ssr: { resolve: { conditions: ['klym-source'] } },
  test: {
    include: ['packages/*/src/**/*.test.ts', 'apps/*/src/**/*.test.ts', 'test/**/*.test.ts'],
    // Bounds for a test that hangs, not figures: two files at a time on two cores can slow a process-heavy one.
    testTimeout: 40_000,
    hookTimeout: 40_000,
    // Most test files wait on processes, sockets and servers rather than compute: two files at a time even on
    // two cores (Vitest's default, one fewer than the cores, runs them one by one there: 591 s of 459 s tests).
    maxWorkers: Math.max(2, availableParallelism() - 1),
  },
});
