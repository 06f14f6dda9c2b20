import fs from 'node:fs';
import path from 'node:path';
import Ajv2020 from 'ajv/dist/2020';
import request from 'supertest';
import { parse as parseYaml } from 'yaml';
import { startTestProduct, type ProductHarness } from '../../support/product-harness';
import { adminRequest, gatewayGet } from './admin-kit';
import { eventually } from '../../support/eventually';
import { expectError } from '../../support/errors';
import { createKey } from '../../support/keys';

/** GET /admin/stats: the console's overview, from real traffic through the gateway, against openapi-admin.yaml. */

const DOCUMENT_ID = 'https://admin.animalstore.example/openapi-admin.yaml';
const document = parseYaml(
  fs.readFileSync(path.resolve(__dirname, '..', '..', '..', 'openapi-admin.yaml'), 'utf8'),
) as object;
const ajv = new Ajv2020({ strict: false, allErrors: true });
ajv.addFormat('date-time', true);
ajv.addSchema(document, DOCUMENT_ID);
const validateReport = ajv.compile({ $ref: `${DOCUMENT_ID}#/components/schemas/StatsReport` });

interface Report {
  totals: {
    requests: number;
    byStatus: Record<string, number>;
    byPlan: Record<string, number>;
    rejectionsByWindow: Record<string, number>;
  };
  points: Array<{ byStatus: Record<string, number> }>;
  activeBans: number | null;
  health: Record<string, string>;
}

let product: ProductHarness;

beforeAll(async () => {
  product = await startTestProduct();
});
afterAll(async () => {
  await product?.close();
});

async function stats(): Promise<Report> {
  const res = await adminRequest(product, 'get', '/admin/stats');
  expect(res.status).toBe(200);
  expect({ valid: validateReport(res.body), errors: validateReport.errors ?? null }).toEqual({
    valid: true,
    errors: null,
  });
  return res.body as Report;
}

test('without the admin token: 401', async () => {
  expectError(await request(product.adminUrl).get('/admin/stats'), 401, 'missing_api_key');
});

test('counts the gateway answers of the last seconds by status class, plan and refusing window, with health and bans', async () => {
  const free = await createKey(product, { name: 'stats-free', plan: 'free' }, { overApi: true });
  const tight = await createKey(
    product,
    { name: 'stats-tight', plan: 'enterprise', limits: { perMinute: 1000, perDay: 1 } },
    { overApi: true },
  );
  for (let i = 0; i < 3; i++) await gatewayGet(product, free.key).expect(200);
  await gatewayGet(product, free.key, '/v1/pets/999999').expect(404);
  await request(product.gatewayUrl).get('/v1/pets').expect(401);
  await gatewayGet(product, tight.key).expect(200);
  await gatewayGet(product, tight.key).expect(429);

  // The recorder samples the counters once a second.
  let report!: Report;
  await eventually(async () => {
    report = await stats();
    return report.totals.requests === 7;
  });
  expect(report.totals).toEqual({
    requests: 7,
    byStatus: { '2xx': 4, '4xx': 2, '429': 1 },
    byPlan: { free: 4, anonymous: 1, enterprise: 2 },
    rejectionsByWindow: { day: 1 },
  });
  expect(report.points.reduce((sum, p) => sum + Object.values(p.byStatus).reduce((a, b) => a + b, 0), 0)).toBe(7);
  expect(report.activeBans).toBe(0);
  expect(report.health).toEqual({
    store: 'ok',
    'key copy database': 'ok',
    'consumer copy database': 'ok',
    'inventory database': 'ok',
    upstream: 'ok',
  });
});
