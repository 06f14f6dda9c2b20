import { startTestProduct, type ProductHarness } from '../../support/product-harness';
import { expectNoStackTrace, runKeys, type CliRun } from './cli-kit';

/** `npm run keys -- consumers …` as a child process against a running admin listener. */
let product: ProductHarness;
let cliEnv: Record<string, string>;

beforeAll(async () => {
  product = await startTestProduct({ redis: false });
  cliEnv = { ADMIN_URL: product.adminUrl, ADMIN_TOKEN: product.adminToken };
});
afterAll(() => product?.close());

const keys = (...args: string[]): Promise<CliRun> => runKeys(args, cliEnv);

function expectSuccess(run: CliRun): void {
  expect({ code: run.code, stderr: run.stderr }).toEqual({ code: 0, stderr: '' });
}

test('create, show, update, credits, a key moved onto it and off it, delete', async () => {
  const created = await keys(
    'consumers',
    'create',
    '--name',
    'Acme',
    '--per-minute',
    '10',
    '--per-month',
    '500',
    '--billing-day',
    '5',
    '--json',
  );
  expectSuccess(created);
  const consumer = JSON.parse(created.stdout) as { id: string; limits: unknown; billingDay: number };
  expect(consumer).toMatchObject({
    id: expect.stringMatching(/^con_/),
    limits: { perMinute: 10, perMonth: 500 },
    billingDay: 5,
  });

  const key = await keys('create', '--name', 'ci', '--plan', 'free', '--consumer', consumer.id, '--json');
  expectSuccess(key);
  const keyId = (JSON.parse(key.stdout) as { id: string }).id;

  const shown = await keys('consumers', 'show', consumer.id);
  expectSuccess(shown);
  expect(shown.stdout).toContain('name:       Acme');
  expect(shown.stdout).toContain(`keys:       ${keyId}`);
  expect(shown.stdout).toMatch(/minute:\s+10 of 10 left/);
  expect((await keys('show', keyId)).stdout).toContain(`consumer:   ${consumer.id}`);

  const credited = await keys('consumers', 'credits', consumer.id, '--units', '20');
  expectSuccess(credited);
  expect(credited.stdout).toMatch(/month:\s+520 of 520 \(20 credited\) left/);

  expectSuccess(await keys('consumers', 'update', consumer.id, '--name', 'Acme Ltd', '--per-day', '100'));
  expect((await keys('consumers', 'list')).stdout).toContain('Acme Ltd');

  const refused = await keys('consumers', 'delete', consumer.id);
  expect(refused.code).toBe(1);
  expect(refused.stderr).toMatch(/^error: .*active key/);
  expectNoStackTrace(refused);

  expectSuccess(await keys('update', keyId, '--no-consumer'));
  expectSuccess(await keys('consumers', 'delete', consumer.id));
  expect((await keys('consumers', 'list', '--json')).stdout).not.toContain(consumer.id);
});

test('usage errors exit 2 with the usage line; an unknown consumer on a key exits 1', async () => {
  const missing = await keys('consumers', 'create', '--per-day', '5');
  expect(missing.code).toBe(2);
  expect(missing.stderr).toMatch(/^error: --name is required\nusage: npm run keys -- consumers create/);
  expect((await keys('consumers', 'create', '--name', 'x', '--per-day', 'lots')).code).toBe(2);
  expect((await keys('consumers', 'update', 'con_000000000000000000000000')).code).toBe(2);
  const unknown = await keys('create', '--name', 'k', '--plan', 'free', '--consumer', 'con_000000000000000000000000');
  expect(unknown.code).toBe(1);
  expect(unknown.stderr).toMatch(/^error: .*consumerId/);
  const help = await keys('--help');
  expect(help.stdout).toContain('consumers create');
});
