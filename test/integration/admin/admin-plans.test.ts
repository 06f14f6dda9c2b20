import fs from 'node:fs';
import path from 'node:path';
import Ajv2020 from 'ajv/dist/2020';
import request from 'supertest';
import { parse as parseYaml } from 'yaml';
import { startTestProduct, type ProductHarness } from '../../support/product-harness';
import { adminRequest } from './admin-kit';
import { expectError } from '../../support/errors';
import { createKey } from '../../support/keys';

/** GET /admin/plans: the configured plans, as the console offers them, against openapi-admin.yaml. */

const DOCUMENT_ID = 'https://admin.animalstore.example/openapi-admin.yaml';
const document = parseYaml(
  fs.readFileSync(path.resolve(__dirname, '..', '..', '..', 'openapi-admin.yaml'), 'utf8'),
) as object;
const ajv = new Ajv2020({ strict: false, allErrors: true });
ajv.addSchema(document, DOCUMENT_ID);
const validatePlanList = ajv.compile({ $ref: `${DOCUMENT_ID}#/components/schemas/PlanList` });

let product: ProductHarness;

beforeAll(async () => {
  // A plan of the operator's own beside the default four, in shadow mode.
  product = await startTestProduct({ overrides: { plans: { trial: { perMinute: 5, perDay: 50, shadow: true } } } });
});
afterAll(async () => {
  await product?.close();
});

test('without the admin token: 401 with the challenge; with a wrong one: 401 invalid_api_key', async () => {
  const missing = await request(product.adminUrl).get('/admin/plans');
  expectError(missing, 401, 'missing_api_key');
  expect(missing.headers['www-authenticate']).toMatch(/^Bearer realm=/);
  expectError(
    await request(product.adminUrl).get('/admin/plans').set('Authorization', 'Bearer wrong-token'),
    401,
    'invalid_api_key',
  );
});

test("every configured plan in the config's order: fixed limits, null for the per-key plan, shadow as configured", async () => {
  const res = await adminRequest(product, 'get', '/admin/plans');
  expect(res.status).toBe(200);
  expect(res.headers['content-type']).toMatch(/^application\/json/);
  expect({ valid: validatePlanList(res.body), errors: validatePlanList.errors ?? null }).toEqual({
    valid: true,
    errors: null,
  });
  expect(res.body).toEqual({
    plans: [
      { name: 'free', perMinute: 60, perDay: 1000, shadow: false },
      { name: 'pro', perMinute: 300, perDay: 10000, shadow: false },
      { name: 'business', perMinute: 1000, perDay: 100000, shadow: false },
      { name: 'enterprise', perMinute: null, perDay: null, shadow: false },
      { name: 'trial', perMinute: 5, perDay: 50, shadow: true },
    ],
  });
});

test('a listed plan is one a key can be created on, with the limits listed', async () => {
  const created = await createKey(product, { name: 'on-trial', plan: 'trial' }, { overApi: true });
  expect(created.limits).toEqual({ perMinute: 5, perDay: 50 });
});
