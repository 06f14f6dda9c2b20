import path from 'node:path';
import { consolePublicDir } from '../../../src/admin/console/console-router';

// The console's static files are found from wherever the module runs: the sources under jest, the
// build npm start runs (dist/admin/console), and the bench's build one level deeper.
const root = path.resolve(__dirname, '..', '..', '..');
const sources = path.join(root, 'src', 'admin', 'console', 'public');

test.each([
  ['the sources', path.join(root, 'src', 'admin', 'console')],
  ['the build npm start runs', path.join(root, 'dist', 'admin', 'console')],
  ['the bench build', path.join(root, 'dist-bench', 'src', 'admin', 'console')],
])('from %s', (_label, moduleDir) => {
  expect(consolePublicDir(moduleDir)).toBe(sources);
});

test('outside any package, it names every place it looked', () => {
  expect(() => consolePublicDir('/nonexistent/admin/console')).toThrow(
    /^operator console files not found \(looked in \/nonexistent\/admin\/console\/public, \/nonexistent\/admin\/console\/src\/admin\/console\/public\)$/,
  );
});
