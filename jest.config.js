/**
 * ESM-only packages that the product loads with require(esm) on Node 24. Jest's own require(esm)
 * needs vm.SourceTextModule, which only exists under --experimental-vm-modules (an experimental
 * flag that prints a warning in every worker), so Jest transpiles these few to CommonJS instead.
 */
const esmOnlyPackages = ['jose', 'http-proxy-middleware', 'httpxy', 'is-plain-obj'];

/** @type {import('jest').Config} */
module.exports = {
  // Node's environment, plus work at a file's end after all its afterAll hooks (the Redis-per-file fixture).
  testEnvironment: '<rootDir>/test/support/kit-environment.js',
  roots: ['<rootDir>/test'],
  testMatch: ['**/*.test.ts'],
  transform: {
    // Transpile only: `npm run typecheck` (tsc --noEmit) does the type checking once for the whole tree.
    '^.+\\.ts$': ['ts-jest', { diagnostics: false }],
    '^.+\\.m?js$': [
      'ts-jest',
      { diagnostics: false, tsconfig: { allowJs: true, module: 'commonjs', target: 'es2022' } },
    ],
  },
  transformIgnorePatterns: [`/node_modules/(?!(${esmOnlyPackages.join('|')})/)`],
  globalSetup: '<rootDir>/test/support/global-setup.ts',
  globalTeardown: '<rootDir>/test/support/global-teardown.ts',
  // A hang guard, not a speed claim: every wait in a test ends on its condition, and a crowded
  // machine (load average 10-20) makes a test with a process start take several times its quiet time.
  // Files that start processes set 180 s (docs/testing.md).
  testTimeout: 120000,
  // Slowest suites first, from Jest's cache or else the committed durations (a fresh clone has no cache).
  testSequencer: '<rootDir>/test/support/slowest-first-sequencer.js',
  // Three workers on the machine's two cores: most of an integration suite's time is spent waiting on
  // the processes it starts (the product, redis-server, Chromium, testssl.sh), so a third keeps the
  // cores busy. Nothing is shared between files that a third worker could trip on: a file that reads
  // MONITOR, INFO or CLIENT LIST, or kills Redis, has a Redis of its own (useRedisPerFile, docs/testing.md
  // rule 9); the run's shared Redis keeps suites apart by namespace; ports are free ports, dirs fresh.
  maxWorkers: 3,
};
