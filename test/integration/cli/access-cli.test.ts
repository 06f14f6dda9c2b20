import { startTestProduct, type ProductHarness } from '../../support/product-harness';
import { expectNoStackTrace, runKeys, type CliRun } from './cli-kit';

/** The CLI's access policy flags (issue 39) as a child process against a running admin listener. */

let product: ProductHarness;
let cliEnv: Record<string, string>;

beforeAll(async () => {
  product = await startTestProduct({ redis: false });
  cliEnv = { ADMIN_URL: product.adminUrl, ADMIN_TOKEN: product.adminToken };
});

afterAll(async () => {
  await product?.close();
});

function keys(...args: string[]): Promise<CliRun> {
  return runKeys(args, cliEnv);
}

it('create sets both lists, show prints them, update replaces and clears them', async () => {
  const created = await keys(
    'create',
    '--name',
    'partner',
    '--plan',
    'free',
    '--operations',
    'listPets,getPet',
    '--addresses',
    '10.0.0.0/8, 2001:db8::/32',
    '--json',
  );
  expect({ code: created.code, stderr: created.stderr }).toEqual({ code: 0, stderr: '' });
  const body = JSON.parse(created.stdout) as { id: string; allowedOperations: string[]; allowedAddresses: string[] };
  expect(body).toMatchObject({
    allowedOperations: ['listPets', 'getPet'],
    allowedAddresses: ['10.0.0.0/8', '2001:db8::/32'],
  });

  const shown = await keys('show', body.id);
  expect(shown.stdout).toContain('operations: listPets, getPet (and usage)');
  expect(shown.stdout).toContain('addresses:  10.0.0.0/8, 2001:db8::/32');

  const updated = await keys('update', body.id, '--operations', 'createPet', '--clear-addresses', '--json');
  expect(updated.code).toBe(0);
  expect(JSON.parse(updated.stdout)).toMatchObject({ allowedOperations: ['createPet'], allowedAddresses: null });
});

it('a bad entry is the admin API 400 naming it (exit 1); set-and-clear of one list is a usage error (exit 2)', async () => {
  const bad = await keys('create', '--name', 'partner', '--plan', 'free', '--addresses', '10.0.0.0/33');
  expect(bad.code).toBe(1);
  expect(bad.stderr).toContain('10.0.0.0/33');
  expectNoStackTrace(bad);
  const both = await keys('update', 'key_000000000000000000000000', '--operations', 'listPets', '--clear-operations');
  expect(both.code).toBe(2);
  expect(both.stderr).toContain('--clear-operations cannot go with --operations');
});
