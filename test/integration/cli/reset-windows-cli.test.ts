import request from 'supertest';
import { startTestProduct, type ProductHarness } from '../../support/product-harness';
import { createKey } from '../../support/keys';
import { awayFromMinuteEnd } from '../../support/minute-end';
import { expectNoStackTrace, runKeys, type CliRun } from './cli-kit';

/** `npm run keys -- reset-windows` and `consumers reset-windows` as child processes against a running admin listener. */
let product: ProductHarness;
let cliEnv: Record<string, string>;

beforeAll(async () => {
  product = await startTestProduct({ redis: false });
  cliEnv = { ADMIN_URL: product.adminUrl, ADMIN_TOKEN: product.adminToken };
});
afterAll(() => product?.close());

const keys = (...args: string[]): Promise<CliRun> => runKeys(args, cliEnv);
const get = (auth: string) => request(product.gatewayUrl).get('/v1/pets?limit=1').set('Authorization', auth);

test('reset-windows of a key: served again, the answer says what each window held', async () => {
  // Three requests and two CLI processes read one minute back (one failed in CI when it turned mid-case).
  await awayFromMinuteEnd(20_000);
  const { id, auth } = await createKey(
    product,
    { plan: 'enterprise', limits: { perMinute: 2, perDay: 100 } },
    { overApi: true },
  );
  expect([(await get(auth)).status, (await get(auth)).status, (await get(auth)).status]).toEqual([200, 200, 429]);
  const run = await keys('reset-windows', id, '--windows', 'minute,day');
  expect({ code: run.code, stderr: run.stderr }).toEqual({ code: 0, stderr: '' });
  expect(run.stdout).toMatch(/minute:\s+2 of 2 left/);
  expect(run.stdout).toContain('reset:      minute held 2 of 2, day held 2 of 100');
  await get(auth).expect(200);
  const json = await keys('reset-windows', id, '--windows', 'minute', '--json');
  expect(JSON.parse(json.stdout)).toMatchObject({ id, reset: { minute: { used: 1, limit: 2 } } });
});

test('consumers reset-windows: its keys are served again', async () => {
  await awayFromMinuteEnd(20_000);
  const created = await keys('consumers', 'create', '--name', 'Acme', '--per-minute', '1', '--json');
  const consumer = JSON.parse(created.stdout) as { id: string };
  const key = JSON.parse(
    (await keys('create', '--name', 'ci', '--plan', 'free', '--consumer', consumer.id, '--json')).stdout,
  ) as { key: string };
  const auth = `Bearer ${key.key}`;
  expect([(await get(auth)).status, (await get(auth)).status]).toEqual([200, 429]);
  const run = await keys('consumers', 'reset-windows', consumer.id, '--windows', 'minute');
  expect({ code: run.code, stderr: run.stderr }).toEqual({ code: 0, stderr: '' });
  expect(run.stdout).toContain('reset:      minute held 1 of 1');
  await get(auth).expect(200);
});

test("usage errors exit 2 with the usage line; a window the key lacks exits 1 with the API's message", async () => {
  const { id } = await createKey(product, { plan: 'free' }, { overApi: true });
  const none = await keys('reset-windows', id);
  expect(none.code).toBe(2);
  expect(none.stderr).toMatch(
    /^error: --windows needs one or more of minute,day,month.*\nusage: npm run keys -- reset-windows ID --windows/,
  );
  const unknown = await keys('consumers', 'reset-windows', 'con_000000000000000000000000', '--windows', 'minute,hour');
  expect(unknown.code).toBe(2);
  expect(unknown.stderr).toMatch(/^error: --windows: unknown window "hour"/);
  const month = await keys('reset-windows', id, '--windows', 'month');
  expect(month.code).toBe(1);
  expect(month.stderr).toMatch(/^error: .*no month window/);
  expectNoStackTrace(month);
});
