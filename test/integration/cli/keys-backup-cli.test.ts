import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import request from 'supertest';
import { startTestProduct, type ProductHarness } from '../../support/product-harness';
import { expectNoStackTrace, runKeys } from './cli-kit';

/**
 * `npm run keys -- export > keys.ndjson` and `npm run keys -- import keys.ndjson` as child
 * processes: the file round-trips into another gateway with the same ids, a second import changes
 * nothing, and a bad file is an error line with exit 1 and nothing imported.
 */

let source: ProductHarness;
let target: ProductHarness;
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'asg-keys-backup-'));

beforeAll(async () => {
  [source, target] = await Promise.all([startTestProduct(), startTestProduct()]);
});
afterAll(async () => {
  await Promise.all([source?.close(), target?.close()]);
});

const envOf = (p: ProductHarness) => ({ ADMIN_URL: p.adminUrl, ADMIN_TOKEN: p.adminToken });

test('export to a file, import it into another gateway: same ids; a second import changes nothing; a bad file imports nothing', async () => {
  for (const name of ['one', 'two', 'three']) {
    const run = await runKeys(['create', '--name', name, '--plan', 'free', '--json'], envOf(source));
    expect(run.code).toBe(0);
  }
  const exported = await runKeys(['export'], envOf(source));
  expect({ code: exported.code, stderr: exported.stderr }).toEqual({ code: 0, stderr: '' });
  const lines = exported.stdout.trimEnd().split('\n');
  expect(lines).toHaveLength(3);
  expect(exported.stdout).not.toMatch(/asg_dev_[0-9A-Za-z]{22,}/);
  const file = path.join(dir, 'keys.ndjson');
  fs.writeFileSync(file, exported.stdout);

  const first = await runKeys(['import', file], envOf(target));
  expect(first).toEqual({ code: 0, stdout: 'imported 3 key record(s), 0 already as in the file\n', stderr: '' });
  const second = await runKeys(['import', file, '--json'], envOf(target));
  expect(JSON.parse(second.stdout)).toEqual({ imported: 0, unchanged: 3 });
  const ids = (p: ProductHarness) =>
    request(p.adminUrl)
      .get('/admin/keys')
      .set('Authorization', `Bearer ${p.adminToken}`)
      .then((r) => (r.body as Array<{ id: string }>).map((k) => k.id));
  expect(await ids(target)).toEqual(await ids(source));

  const bad = path.join(dir, 'bad.ndjson');
  fs.writeFileSync(bad, `${lines[0]}\n{"v":1,"prefix":"asg_live_"}\n`);
  const refused = await runKeys(['import', bad], envOf(source));
  expect(refused.code).toBe(1);
  expect(refused.stderr).toMatch(
    /^error: Nothing imported: line 2: key of prefix asg_live_ refused.*\(400 validation_failed\)\n$/,
  );
  expectNoStackTrace(refused);
  const missing = await runKeys(['import', path.join(dir, 'absent.ndjson')], envOf(source));
  expect(missing.code).toBe(2);
  expect(missing.stderr).toMatch(/^error: cannot read .*absent\.ndjson: ENOENT/);
}, 60_000);
