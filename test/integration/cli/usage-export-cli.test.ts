import { startTestProduct, type ProductHarness } from '../../support/product-harness';
import { expectNoStackTrace, runKeys } from './cli-kit';

/**
 * `npm run keys -- usage-export --from … --to …` as a child process: the export's lines on stdout,
 * as the admin API streams them; bad dates are the API's 400 on stderr with exit 1, a missing flag
 * a usage error with exit 2.
 */

let product: ProductHarness;

beforeAll(async () => {
  product = await startTestProduct();
});
afterAll(async () => {
  await product?.close();
});

const env = () => ({ ADMIN_URL: product.adminUrl, ADMIN_TOKEN: product.adminToken });

test('prints one NDJSON line per key and day with traffic', async () => {
  const { key, record } = await product.keyService.create({ name: 'billed', plan: 'free' });
  for (let i = 0; i < 3; i++) {
    const res = await fetch(`${product.gatewayUrl}/v1/pets`, { headers: { authorization: `Bearer ${key}` } });
    await res.arrayBuffer();
  }
  const today = new Date().toISOString().slice(0, 10);
  const run = await runKeys(['usage-export', '--from', today, '--to', today], env());
  expect({ code: run.code, stderr: run.stderr }).toEqual({ code: 0, stderr: '' });
  expect(run.stdout.endsWith('\n')).toBe(true);
  const lines = run.stdout
    .trimEnd()
    .split('\n')
    .map((line) => JSON.parse(line) as { keyId: string; date: string; admitted: number; units: number });
  // The day the lines were counted on (a run at midnight may see yesterday's date on the server's clock).
  expect(lines.filter((l) => l.keyId === record.id)).toEqual([
    { date: expect.any(String), keyId: record.id, consumerId: null, admitted: 3, units: 3, rateLimited: 0, banned: 0 },
  ]);
});

test('bad dates: the API says why, exit 1; a missing flag: usage, exit 2; never a stack trace', async () => {
  const backwards = await runKeys(['usage-export', '--from', '2026-03-10', '--to', '2026-03-01'], env());
  expect({ code: backwards.code, stdout: backwards.stdout, stderr: backwards.stderr }).toEqual({
    code: 1,
    stdout: '',
    stderr: 'error: to must not be before from. (400 invalid_parameter)\n',
  });
  const missing = await runKeys(['usage-export', '--from', '2026-03-10'], env());
  expect({ code: missing.code, stdout: missing.stdout }).toEqual({ code: 2, stdout: '' });
  expect(missing.stderr).toMatch(
    /^error: --to is required \(a UTC date, YYYY-MM-DD\)\nusage: npm run keys -- usage-export/,
  );
  for (const run of [backwards, missing]) expectNoStackTrace(run);
});
