import fs from 'node:fs';
import path from 'node:path';

/**
 * Every element a console module looks up with byId(id, Kind) is in index.html, once, as that kind
 * of element. The page itself throws at load on a missing id (dom.js); this finds it without a browser.
 */
const publicDir = path.resolve(__dirname, '..', '..', '..', 'src', 'admin', 'console', 'public');
const html = fs.readFileSync(path.join(publicDir, 'index.html'), 'utf8');
const modules = fs.readdirSync(publicDir).filter((name) => name.endsWith('.js'));

const TAGS: Record<string, string | null> = {
  HTMLElement: null,
  HTMLInputElement: 'input',
  HTMLSelectElement: 'select',
  HTMLFormElement: 'form',
  HTMLButtonElement: 'button',
  HTMLMeterElement: 'meter',
  HTMLDialogElement: 'dialog',
};

const lookups = modules.flatMap((name) =>
  [...fs.readFileSync(path.join(publicDir, name), 'utf8').matchAll(/byId\('([^']+)', (\w+)\)/g)].map((m) => ({
    module: name,
    id: m[1]!,
    kind: m[2]!,
  })),
);

test('the modules look up elements by id (the scan below is not empty)', () => {
  expect(lookups.length).toBeGreaterThan(50);
  expect(new Set(lookups.map((l) => l.module))).toEqual(
    new Set([
      'dom.js',
      'secret.js',
      'overview.js',
      'keys-list.js',
      'key-page.js',
      'deprecations.js',
      'audit.js',
      'sign-in.js',
      'router.js',
      'consumers.js',
      'access-fields.js',
      'window-reset.js',
    ]),
  );
});

test('each id is in index.html exactly once, as the kind of element the module expects', () => {
  const problems = lookups.flatMap(({ module, id, kind }) => {
    const tags = [...html.matchAll(new RegExp(`<(\\w+)[^>]*\\sid="${id}"`, 'g'))].map((m) => m[1]!);
    if (tags.length !== 1) return [`${module}: #${id} is in index.html ${tags.length} times`];
    if (!(kind in TAGS)) return [`${module}: #${id} looked up as ${kind}, which this test does not know`];
    const expected = TAGS[kind];
    return expected && tags[0] !== expected ? [`${module}: #${id} is a <${tags[0]}>, looked up as ${kind}`] : [];
  });
  expect(problems).toEqual([]);
});

test('index.html loads the entry module as a module script, and no module is left unimported', () => {
  expect(html).toContain('<script type="module" src="/console/main.js"></script>');
  const imported = new Set(['main.js', 'types.js']);
  for (const name of modules) {
    for (const m of fs.readFileSync(path.join(publicDir, name), 'utf8').matchAll(/from '\.\/([\w-]+\.js)'/g))
      imported.add(m[1]!);
  }
  expect(modules.filter((name) => !imported.has(name))).toEqual([]);
});

test('every module is type-checked: // @ts-check on its first line', () => {
  expect(
    modules.filter((name) => !fs.readFileSync(path.join(publicDir, name), 'utf8').startsWith('// @ts-check\n')),
  ).toEqual([]);
});
