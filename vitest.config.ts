import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Local scratch runs (gitignored) are run by name, never as part of the suite.
    exclude: ['test/sim/zz-*', 'node_modules/**'],
    // Kernel and simulator suites are CPU bound; the CI machine has 2 cores.
    pool: 'forks',
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
