import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Ajv2020 from 'ajv/dist/2020';
import request from 'supertest';
import { parse as parseYaml } from 'yaml';
import { startTestProduct, type ProductHarness } from '../../support/product-harness';

/**
 * Real answers of the admin listener against openapi-admin.yaml: each status documented for its
 * operation, and each JSON body valid against the documented schema.
 */
type Node = { [key: string]: unknown };
const DOCUMENT_ID = 'https://admin.animalstore.example/openapi-admin.yaml';
const document = parseYaml(
  fs.readFileSync(path.resolve(__dirname, '..', '..', '..', 'openapi-admin.yaml'), 'utf8'),
) as { paths: Record<string, Node> };
const ajv = new Ajv2020({ strict: false, allErrors: true });
ajv.addFormat('date-time', true);
ajv.addSchema(document, DOCUMENT_ID);

function resolve(node: Node): Node {
  let current = node;
  while (typeof current.$ref === 'string') {
    current = (current.$ref as string)
      .slice(2)
      .split('/')
      .reduce<Node>((n, segment) => n[segment] as Node, document as unknown as Node);
  }
  return current;
}

/** Problems of `res` for `method template` by the document; empty when it conforms. */
function mismatches(method: string, template: string, res: request.Response): string[] {
  const operation = (document.paths[template]?.[method] as Node | undefined) ?? null;
  if (!operation) return [`${method} ${template} is not documented`];
  const responses = operation.responses as Node;
  const documented = responses[String(res.status)] as Node | undefined;
  if (!documented) return [`${method} ${template} → ${res.status} is not documented`];
  const content = resolve(documented).content as Node | undefined;
  if (!content) return res.text ? [`${res.status} documents no body, got ${res.text}`] : [];
  const pointer = `#/paths/${template.replace(/~/g, '~0').replace(/\//g, '~1')}/${method}/responses/${res.status}`;
  const ref = (documented.$ref as string | undefined) ?? pointer;
  const validate = ajv.compile({ $ref: `${DOCUMENT_ID}${ref}/content/application~1json/schema` });
  if (validate(JSON.parse(res.text))) return [];
  return (validate.errors ?? []).map((e) => `${res.status} ${e.instancePath || 'body'}: ${e.message}`);
}

let product: ProductHarness;
const bearer = () => `Bearer ${product.adminToken}`;
function send(method: 'get' | 'post' | 'patch' | 'delete', url: string): request.Test {
  return request(product.adminUrl)[method](url).set('Authorization', bearer());
}

beforeAll(async () => {
  product = await startTestProduct();
});
afterAll(async () => {
  await product?.close();
});

test('every key lifecycle answer, good and bad, matches openapi-admin.yaml', async () => {
  const checked: Array<[string, string, request.Response]> = [];
  const created = await send('post', '/admin/keys').send({
    name: 'documented',
    plan: 'free',
    expiresAt: new Date(Date.now() + 3_600_000).toISOString(),
  });
  checked.push(['post', '/admin/keys', created]);
  const id = (created.body as { id: string }).id;
  await request(product.gatewayUrl)
    .get('/v1/pets')
    .set('Authorization', `Bearer ${(created.body as { key: string }).key}`)
    .expect(200);
  checked.push([
    'post',
    '/admin/keys',
    await send('post', '/admin/keys').send({ name: 'x', plan: 'free', expiresAt: 'friday' }),
  ]);
  checked.push(['post', '/admin/keys', await request(product.adminUrl).post('/admin/keys').send({})]);
  checked.push(['get', '/admin/keys', await send('get', '/admin/keys')]);
  checked.push(['get', '/admin/keys/{id}', await send('get', `/admin/keys/${id}`)]);
  checked.push(['patch', '/admin/keys/{id}', await send('patch', `/admin/keys/${id}`).send({ expiresAt: null })]);
  checked.push([
    'post',
    '/admin/keys/{id}/rotate',
    await send('post', `/admin/keys/${id}/rotate`).send({ graceSeconds: 60 }),
  ]);
  checked.push([
    'post',
    '/admin/keys/{id}/rotate',
    await send('post', `/admin/keys/${id}/rotate`).send({ graceSeconds: -1 }),
  ]);
  checked.push([
    'post',
    '/admin/keys/{id}/rotate',
    await send('post', `/admin/keys/${id}/rotate`).set('Content-Type', 'text/plain').send('x'),
  ]);
  checked.push([
    'post',
    '/admin/keys/{id}/rotate',
    await send('post', '/admin/keys/key_000000000000000000000000/rotate'),
  ]);
  checked.push(['get', '/admin/keys/{id}', await send('get', `/admin/keys/${id}`)]);
  // A key with a month window of its own and a billing day: credits, its detail with usage.month.
  const metered = await send('post', '/admin/keys').send({
    name: 'metered',
    plan: 'enterprise',
    limits: { perMinute: 10, perDay: 100, perMonth: 1000 },
    billingDay: 15,
  });
  checked.push(['post', '/admin/keys', metered]);
  const meteredId = (metered.body as { id: string }).id;
  checked.push([
    'post',
    '/admin/keys/{id}/credits',
    await send('post', `/admin/keys/${meteredId}/credits`).send({ units: 50 }),
  ]);
  checked.push([
    'post',
    '/admin/keys/{id}/credits',
    await send('post', `/admin/keys/${meteredId}/credits`).send({ units: 0 }),
  ]);
  checked.push([
    'post',
    '/admin/keys/{id}/credits',
    await send('post', `/admin/keys/${id}/credits`).send({ units: 5 }),
  ]);
  checked.push([
    'post',
    '/admin/keys/{id}/credits',
    await send('post', '/admin/keys/key_000000000000000000000000/credits').send({ units: 5 }),
  ]);
  checked.push([
    'post',
    '/admin/keys/{id}/credits',
    await send('post', `/admin/keys/${meteredId}/credits`).set('Content-Type', 'text/plain').send('5'),
  ]);
  const meteredDetail = await send('get', `/admin/keys/${meteredId}`);
  expect(meteredDetail.body.usage.month).toMatchObject({ limit: 1050, remaining: 1050, credits: 50 });
  checked.push(['get', '/admin/keys/{id}', meteredDetail]);
  checked.push(['get', '/admin/keys/{id}/usage', await send('get', `/admin/keys/${id}/usage?days=7`)]);
  checked.push(['get', '/admin/keys/{id}/usage', await send('get', `/admin/keys/${id}/usage?days=0`)]);
  checked.push(['get', '/admin/keys/{id}/usage', await send('get', '/admin/keys/key_000000000000000000000000/usage')]);
  checked.push(['delete', '/admin/keys/{id}/ban', await send('delete', `/admin/keys/${id}/ban`)]);
  checked.push(['delete', '/admin/keys/{id}', await send('delete', `/admin/keys/${id}`)]);
  checked.push(['post', '/admin/keys/{id}/rotate', await send('post', `/admin/keys/${id}/rotate`).send({})]);
  const exported = await send('get', '/admin/keys/export');
  expect(exported.headers['content-type']).toMatch(/^application\/x-ndjson/);
  checked.push([
    'post',
    '/admin/keys/import',
    await send('post', '/admin/keys/import').set('Content-Type', 'application/x-ndjson').send(exported.text),
  ]);
  checked.push([
    'post',
    '/admin/keys/import',
    await send('post', '/admin/keys/import').set('Content-Type', 'application/x-ndjson').send('{"v":1}\n'),
  ]);
  checked.push([
    'post',
    '/admin/keys/import',
    await send('post', '/admin/keys/import').set('Content-Type', 'application/xml').send('<k/>'),
  ]);
  checked.push(['get', '/admin/audit', await send('get', '/admin/audit?limit=10')]);
  checked.push(['get', '/admin/audit', await send('get', '/admin/audit?limit=1001')]);
  checked.push(['get', '/admin/plans', await send('get', '/admin/plans')]);
  checked.push(['get', '/admin/plans', await request(product.adminUrl).get('/admin/plans')]);

  expect(checked.map(([, , res]) => res.status)).toEqual([
    201, 400, 401, 200, 200, 200, 201, 400, 415, 404, 200, 201, 200, 400, 409, 404, 415, 200, 200, 400, 404, 204, 204,
    409, 200, 400, 415, 200, 400, 200, 401,
  ]);
  const problems = checked.flatMap(([method, template, res]) =>
    mismatches(method, template, res).map((p) => `${method} ${template}: ${p}`),
  );
  expect(problems).toEqual([]);
});

test('GET /admin/config and POST /admin/reload, good and bad, match openapi-admin.yaml', async () => {
  const configFile = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'asg-openapi-reload-')), 'extra.yaml');
  fs.writeFileSync(configFile, 'cors:\n  allowedOrigins: []\n');
  const reloading = await startTestProduct({ env: { CONFIG_FILE: configFile } });
  try {
    const admin = (method: 'get' | 'post', url: string) =>
      request(reloading.adminUrl)[method](url).set('Authorization', `Bearer ${reloading.adminToken}`);
    const checked: Array<[string, string, request.Response]> = [];
    checked.push(['get', '/admin/config', await admin('get', '/admin/config')]);
    checked.push(['get', '/admin/config', await request(reloading.adminUrl).get('/admin/config')]);
    fs.writeFileSync(configFile, 'cors:\n  allowedOrigins: ["https://app.example"]\nserver:\n  adminPort: 1\n');
    checked.push(['post', '/admin/reload', await admin('post', '/admin/reload')]);
    checked.push(['get', '/admin/config', await admin('get', '/admin/config')]);
    fs.writeFileSync(configFile, 'cors:\n  allowedOrigins: ["nope"]\n');
    checked.push(['post', '/admin/reload', await admin('post', '/admin/reload')]);
    checked.push(['post', '/admin/reload', await request(reloading.adminUrl).post('/admin/reload')]);

    expect(checked.map(([, , res]) => res.status)).toEqual([200, 401, 200, 200, 400, 401]);
    const problems = checked.flatMap(([method, template, res]) =>
      mismatches(method, template, res).map((p) => `${method} ${template}: ${p}`),
    );
    expect(problems).toEqual([]);
  } finally {
    await reloading.close();
  }
});

test('the usage export and the busiest keys, good and bad, match openapi-admin.yaml', async () => {
  const created = await send('post', '/admin/keys').send({ name: 'used', plan: 'free' });
  await request(product.gatewayUrl)
    .get('/v1/pets')
    .set('Authorization', `Bearer ${(created.body as { key: string }).key}`)
    .expect(200);
  const today = new Date().toISOString().slice(0, 10);
  const checked: Array<[string, string, request.Response]> = [];
  checked.push(['get', '/admin/stats/top-keys', await send('get', '/admin/stats/top-keys?minutes=60&limit=5')]);
  checked.push(['get', '/admin/stats/top-keys', await send('get', '/admin/stats/top-keys?minutes=15')]);
  checked.push(['get', '/admin/stats/top-keys', await request(product.adminUrl).get('/admin/stats/top-keys')]);
  checked.push(['get', '/admin/usage/export', await send('get', '/admin/usage/export?from=2026-01-02&to=2026-01-01')]);
  checked.push([
    'get',
    '/admin/usage/export',
    await request(product.adminUrl).get(`/admin/usage/export?from=${today}&to=${today}`),
  ]);
  expect(checked.map(([, , res]) => res.status)).toEqual([200, 400, 401, 400, 401]);
  expect((checked[0]![2].body as { keys: unknown[] }).keys.length).toBeGreaterThan(0);
  const problems = checked.flatMap(([method, template, res]) =>
    mismatches(method, template, res).map((p) => `${method} ${template}: ${p}`),
  );
  expect(problems).toEqual([]);

  // The export's lines, each against its documented schema.
  const exported = await send('get', `/admin/usage/export?from=${today}&to=${today}`);
  expect({ status: exported.status, type: exported.headers['content-type'] }).toEqual({
    status: 200,
    type: 'application/x-ndjson; charset=utf-8',
  });
  const validate = ajv.compile({ $ref: `${DOCUMENT_ID}#/components/schemas/UsageExportLine` });
  const lines = exported.text
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as unknown);
  expect(lines.length).toBeGreaterThan(0);
  for (const line of lines)
    expect({ line, valid: validate(line), errors: validate.errors ?? null }).toEqual({
      line,
      valid: true,
      errors: null,
    });
});

test('window resets of a key and a consumer, good and bad, match openapi-admin.yaml', async () => {
  const key = await send('post', '/admin/keys').send({
    name: 'reset',
    plan: 'enterprise',
    limits: { perMinute: 10, perDay: 100, perMonth: 1000 },
  });
  const free = await send('post', '/admin/keys').send({ name: 'no month', plan: 'free' });
  const consumer = await send('post', '/admin/consumers').send({
    name: 'reset',
    limits: { perMinute: 5, perMonth: 50 },
  });
  const keyPath = `/admin/keys/${(key.body as { id: string }).id}/windows/reset`;
  const consumerPath = `/admin/consumers/${(consumer.body as { id: string }).id}/windows/reset`;
  const checked: Array<[string, string, request.Response]> = [];
  checked.push([
    'post',
    '/admin/keys/{id}/windows/reset',
    await send('post', keyPath).send({ windows: ['minute', 'day', 'month'] }),
  ]);
  checked.push(['post', '/admin/keys/{id}/windows/reset', await send('post', keyPath).send({ windows: [] })]);
  checked.push([
    'post',
    '/admin/keys/{id}/windows/reset',
    await request(product.adminUrl)
      .post(keyPath)
      .send({ windows: ['day'] }),
  ]);
  checked.push([
    'post',
    '/admin/keys/{id}/windows/reset',
    await send('post', '/admin/keys/key_000000000000000000000000/windows/reset').send({ windows: ['day'] }),
  ]);
  checked.push([
    'post',
    '/admin/keys/{id}/windows/reset',
    await send('post', `/admin/keys/${(free.body as { id: string }).id}/windows/reset`).send({ windows: ['month'] }),
  ]);
  checked.push([
    'post',
    '/admin/keys/{id}/windows/reset',
    await send('post', keyPath).set('Content-Type', 'text/plain').send('day'),
  ]);
  checked.push([
    'post',
    '/admin/consumers/{id}/windows/reset',
    await send('post', consumerPath).send({ windows: ['minute', 'month'] }),
  ]);
  checked.push([
    'post',
    '/admin/consumers/{id}/windows/reset',
    await send('post', consumerPath).send({ windows: ['day'] }),
  ]);
  checked.push([
    'post',
    '/admin/consumers/{id}/windows/reset',
    await send('post', consumerPath).send({ windows: ['year'] }),
  ]);
  checked.push([
    'post',
    '/admin/consumers/{id}/windows/reset',
    await send('post', '/admin/consumers/con_000000000000000000000000/windows/reset').send({ windows: ['minute'] }),
  ]);
  checked.push(['get', '/admin/audit', await send('get', '/admin/audit?limit=5')]);
  expect(checked.map(([, , res]) => res.status)).toEqual([200, 400, 401, 404, 409, 415, 200, 409, 400, 404, 200]);
  const problems = checked.flatMap(([method, template, res]) =>
    mismatches(method, template, res).map((p) => `${method} ${template}: ${p}`),
  );
  expect(problems).toEqual([]);
});
