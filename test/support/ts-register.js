// Lets tests spawn a TypeScript entry point as a real child process without a build step:
// `node -r ./test/support/ts-register.js src/inventory/main.ts`. Transpiles each file with the
// TypeScript compiler (no type check; `npm run typecheck` does that) and keeps the output in a
// cache keyed by path, size and mtime, so that the many child processes a test run starts do not
// each load the compiler.
'use strict';
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const nodeCrypto = require('node:crypto');

const cacheDir = path.join(os.tmpdir(), 'asg-ts-register-cache');

// V8's compiled code for every module this child loads (node_modules and the transpiled sources),
// kept on disk across the many processes a run starts: about a fifth of a start's CPU (1.1 s -> 0.9 s
// measured on src/main.ts). Node 22.1+; both Nodes the suite runs on have it.
require('node:module').enableCompileCache?.(path.join(os.tmpdir(), 'asg-node-compile-cache'));
let typescript = null;

function transpile(source, filename) {
  typescript ??= require('typescript');
  const { outputText } = typescript.transpileModule(source, {
    fileName: filename,
    compilerOptions: {
      module: typescript.ModuleKind.CommonJS,
      target: typescript.ScriptTarget.ES2022,
      esModuleInterop: true,
      inlineSourceMap: true,
    },
  });
  return outputText;
}

require.extensions['.ts'] = function compileTypeScript(module, filename) {
  const stat = fs.statSync(filename);
  const key = nodeCrypto.createHash('sha256').update(`${filename}\0${stat.size}\0${stat.mtimeMs}`).digest('hex');
  const cached = path.join(cacheDir, `${key}.js`);
  let code;
  try {
    code = fs.readFileSync(cached, 'utf8');
  } catch {
    code = transpile(fs.readFileSync(filename, 'utf8'), filename);
    fs.mkdirSync(cacheDir, { recursive: true });
    // Write then rename, so a concurrent reader never sees half a file.
    const temporary = `${cached}.${process.pid}.tmp`;
    fs.writeFileSync(temporary, code);
    fs.renameSync(temporary, cached);
  }
  module._compile(code, filename);
};
