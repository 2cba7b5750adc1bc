import { defineConfig } from 'vitest/config';

export default defineConfig({
  resolve: { conditions: ['klym-source'] },
  ssr: { resolve: { conditions: ['klym-source'] } },
  test: {
    include: ['packages/*/src/**/*.test.ts', 'apps/*/src/**/*.test.ts', 'test/**/*.test.ts'],
    testTimeout: 20_000,
    hookTimeout: 20_000,
  },
});
