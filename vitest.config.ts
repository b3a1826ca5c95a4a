import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    exclude: ['node_modules/**'],
    // Kernel and simulator suites are CPU bound; the CI machine has 2 cores.
    pool: 'forks',
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
