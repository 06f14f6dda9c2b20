/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/test'],
  testMatch: ['**/*.test.ts'],
  transform: {
    // Transpile only: `npm run typecheck` (tsc --noEmit) does the type checking once for the whole tree.
    '^.+\\.ts$': ['ts-jest', { diagnostics: false }],
  },
  globalSetup: '<rootDir>/test/support/global-setup.ts',
  globalTeardown: '<rootDir>/test/support/global-teardown.ts',
  testTimeout: 30000,
  // Integration suites start servers and Redis processes; two workers match the machine's two cores.
  maxWorkers: 2,
};
