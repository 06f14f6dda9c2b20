import fs from 'node:fs';
import path from 'node:path';

// The npm scripts are how everyone runs the product (npm start, npm run keys, npm run bench):
// every file a script or build-if-needed.js runs must exist after npm ci.
const root = path.resolve(__dirname, '..', '..', '..');
const scripts = (JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts;

describe('npm scripts', () => {
  it.each(Object.entries(scripts))('%s runs only files that exist (or that the script builds first)', (_name, command) => {
    const built = /^dist(-bench)?\//;
    for (const [, file] of command.matchAll(/\bnode (\S+\.js|node_modules\/\S+)/g)) {
      if (built.test(file!)) continue;
      expect({ file, exists: fs.existsSync(path.join(root, file!)) }).toEqual({ file, exists: true });
    }
  });

  it('build-if-needed.js runs the TypeScript compiler from a path that exists', () => {
    const script = fs.readFileSync(path.join(root, 'scripts', 'build-if-needed.js'), 'utf8');
    const joined = /path\.join\(root, ((?:'[^']+'(?:, )?)+)\)/g;
    const compilerPaths = [...script.matchAll(joined)].map((m) => m[1]!.split(', ').map((part) => part.slice(1, -1))).filter((parts) => parts.includes('tsc'));
    expect(compilerPaths).toHaveLength(1);
    expect(fs.existsSync(path.join(root, ...compilerPaths[0]!))).toBe(true);
  });
});
