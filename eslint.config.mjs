// `npm run lint`: typescript-eslint's recommended rules on every TypeScript and JavaScript file we
// write, and prettier's check for layout (eslint-config-prettier turns off the rules prettier owns).
import eslint from '@eslint/js';
import { defineConfig } from 'eslint/config';
import prettier from 'eslint-config-prettier';
import globals from 'globals';
import tseslint from 'typescript-eslint';

export default defineConfig(
  {
    ignores: ['node_modules/', 'dist/', 'dist-bench/', 'dist-check/', 'coverage/', '.ci/node26/', 'deploy/'],
  },
  eslint.configs.recommended,
  tseslint.configs.recommended,
  {
    languageOptions: {
      globals: { ...globals.node },
    },
    rules: {
      // Prettier does not wrap comments or long strings; keep them readable too.
      'max-len': ['error', { code: 180, ignoreUrls: true }],
      // Matching control characters is the point where we use them (terminal-safe output, its tests).
      'no-control-regex': 'off',
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' },
      ],
    },
  },
  {
    files: ['src/admin/console/**/*.js', 'test/unit/admin/console/**'],
    languageOptions: { globals: { ...globals.browser } },
  },
  {
    files: ['**/*.cjs', 'jest.config.js', 'scripts/**/*.js', 'test/support/**/*.js'],
    languageOptions: { sourceType: 'commonjs' },
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
  prettier,
);
