#!/usr/bin/env node
// Rebuilds dist/ when any source file is newer than the last build, so `npm start` works on a
// fresh clone and after an edit without a separate build step.
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const { execFileSync } = require('node:child_process');

const root = path.resolve(__dirname, '..');
const stamp = path.join(root, 'dist', '.build-stamp');

function newestMtime(dir) {
  let newest = 0;
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    const mtime = entry.isDirectory() ? newestMtime(full) : fs.statSync(full).mtimeMs;
    if (mtime > newest) newest = mtime;
  }
  return newest;
}

const sources = Math.max(
  newestMtime(path.join(root, 'src')),
  fs.statSync(path.join(root, 'tsconfig.json')).mtimeMs,
  fs.statSync(path.join(root, 'tsconfig.build.json')).mtimeMs,
);
const built = fs.existsSync(stamp) ? fs.statSync(stamp).mtimeMs : 0;
if (sources > built) {
  process.stderr.write('building dist/ …\n');
  // A fresh dist/: a module that moved (src/product.ts to src/product/index.ts) must not leave its
  // old file behind, which Node would load before the folder.
  fs.rmSync(path.join(root, 'dist'), { recursive: true, force: true });
  // TypeScript 7 (the npm alias typescript-7) builds; its package exports no bin path to resolve.
  execFileSync(
    process.execPath,
    [path.join(root, 'node_modules', 'typescript-7', 'bin', 'tsc'), '-p', 'tsconfig.build.json'],
    {
      cwd: root,
      stdio: 'inherit',
    },
  );
  fs.writeFileSync(stamp, new Date().toISOString());
}
