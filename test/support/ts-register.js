// Lets tests spawn a TypeScript entry point as a real child process without a build step:
// `node -r ./test/support/ts-register.js src/inventory/main.ts`. Compiles with the same swc the
// jest transform uses.
'use strict';
const fs = require('node:fs');
const { transformSync } = require('@swc/core');

require.extensions['.ts'] = function compileTypeScript(module, filename) {
  const source = fs.readFileSync(filename, 'utf8');
  const { code } = transformSync(source, {
    filename,
    jsc: { target: 'es2022', parser: { syntax: 'typescript' } },
    module: { type: 'commonjs' },
    sourceMaps: 'inline',
  });
  module._compile(code, filename);
};
