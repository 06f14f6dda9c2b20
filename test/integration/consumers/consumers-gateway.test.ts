import fs from 'node:fs';
import path from 'node:path';
import Ajv2020 from 'ajv/dist/2020';
import request from 'supertest';
import { parse as parseYaml } from 'yaml';
import { startTestProduct, type ProductHarness } from '../../support/product-harness';
import { uniqueNamespace } from '../../support/test-redis';
import { expectMatchesOpenApi } from '../../support/openapi';
import { adminRequest, gatewayGet } from '../admin/admin-kit';
import { eventually } from '../../support/eventually';

/**
 * Consumers end to end (CONTRACT §4): two gateway instances on one Redis, the consumer's windows in
 * the headers and in GET /v1/usage, a change reaching the other instance within a second, and the
 * admin answers checked against openapi-admin.yaml.
 */
let a: ProductHarness;
let b: ProductHarness;

beforeAll(async () => {
  const namespace = uniqueNamespace('consumers');
  a = await startTestProduct({ namespace });
  b = await startTestProduct({ namespace });
});
afterAll(async () => {
  await a?.close();
  await b?.close();
});

async function consumerWithKeys(
  product: ProductHarness,
  limits: Record<string, number>,
  keys: number,
): Promise<{ id: string; keys: Array<{ id: string; key: string }> }> {
  const consumer = await adminRequest(product, 'post', '/admin/consumers').send({ name: 'Acme', limits });
  expect(consumer.status).toBe(201);
  const created: Array<{ id: string; key: string }> = [];
  for (let i = 0; i < keys; i++) {
    const res = await adminRequest(product, 'post', '/admin/keys').send({
      name: `k${i}`,
      plan: 'pro',
      consumerId: consumer.body.id,
    });
    expect(res.status).toBe(201);
    created.push(res.body as { id: string; key: string });
  }
  return { id: consumer.body.id as string, keys: created };
}

it('two keys of a consumer with perMinute 10 get 10 answers in all over two instances, with the consumer windows in the headers', async () => {
  const consumer = await consumerWithKeys(a, { perMinute: 10, perDay: 500 }, 2);
  // The other instance learns of the consumer within a second.
  await eventually(
    async () => (await gatewayGet(b, consumer.keys[1]!.key, '/v1/usage')).body.consumer?.id === consumer.id,
    { timeoutMs: 1000 },
  );
  // The fixed minute is the UTC minute: start the 20 requests well before one ends, so they count in one.
  await eventually(() => Date.now() % 60_000 < 40_000, { timeoutMs: 25_000, what: 'the first 40 s of a UTC minute' });
  const statuses: number[] = [];
  let refused: request.Response | undefined;
  for (let i = 0; i < 20; i++) {
    const res = await gatewayGet(i % 2 === 0 ? a : b, consumer.keys[i % 2]!.key);
    statuses.push(res.status);
    if (res.status === 429) refused ??= res;
    if (i === 0) {
      expect(res.headers['ratelimit-policy']).toBe(
        '"minute";q=300;w=60, "day";q=10000;w=86400, "consumer-minute";q=10;w=60, "consumer-day";q=500;w=86400',
      );
      expect(res.headers['ratelimit']).toMatch(
        /^"minute";r=299;t=\d+, "day";r=9999;t=\d+, "consumer-minute";r=9;t=\d+, "consumer-day";r=499;t=\d+$/,
      );
      // The consumer's minute is the closest to exhaustion.
      expect(res.headers['x-ratelimit-limit']).toBe('10');
      expect(res.headers['x-ratelimit-remaining']).toBe('9');
    }
  }
  expect(statuses.filter((s) => s === 200)).toHaveLength(10);
  expect(refused!.body).toMatchObject({ code: 'rate_limited', status: 429 });
  expect(refused!.headers['x-ratelimit-limit']).toBe('10');
  expect(refused!.headers['x-ratelimit-remaining']).toBe('0');
  expect(Number(refused!.headers['retry-after'])).toBeGreaterThanOrEqual(1);
  expect(Number(refused!.headers['retry-after'])).toBeLessThanOrEqual(60);
  expectMatchesOpenApi('get', '/pets', refused!);

  const usage = await gatewayGet(b, consumer.keys[0]!.key, '/v1/usage');
  expect(usage.status).toBe(200);
  expect(usage.body.consumer).toEqual({ id: consumer.id, name: 'Acme' });
  expect(usage.body.windows).toEqual([
    { name: 'minute', limit: 300, remaining: 295, reset: expect.any(Number) },
    { name: 'day', limit: 10000, remaining: 9995, reset: expect.any(Number) },
    { name: 'consumer-minute', limit: 10, remaining: 0, reset: expect.any(Number) },
    { name: 'consumer-day', limit: 500, remaining: 490, reset: expect.any(Number) },
  ]);
  expectMatchesOpenApi('get', '/usage', usage);
});

it('a change of the consumer limits and a key moved to none reach the other instance within a second', async () => {
  const consumer = await consumerWithKeys(a, { perDay: 100 }, 1);
  const key = consumer.keys[0]!;
  await eventually(async () => (await gatewayGet(b, key.key, '/v1/usage')).body.consumer?.id === consumer.id, {
    timeoutMs: 1000,
  });
  expect(
    (await adminRequest(a, 'patch', `/admin/consumers/${consumer.id}`).send({ limits: { perDay: 1 } })).status,
  ).toBe(200);
  await eventually(
    async () =>
      (await gatewayGet(b, key.key, '/v1/usage')).body.windows.some(
        (w: { name: string; limit: number }) => w.name === 'consumer-day' && w.limit === 1,
      ),
    { timeoutMs: 1000 },
  );
  expect((await gatewayGet(b, key.key)).status).toBe(200);
  expect((await gatewayGet(b, key.key)).status).toBe(429);
  // Moved to no consumer: its own windows go along (its day counted 2 here, 1 admitted).
  expect((await adminRequest(a, 'patch', `/admin/keys/${key.id}`).send({ consumerId: null })).status).toBe(200);
  await eventually(async () => (await gatewayGet(b, key.key, '/v1/usage')).body.consumer === undefined, {
    timeoutMs: 1000,
  });
  const usage = await gatewayGet(b, key.key, '/v1/usage');
  expect(usage.body.windows).toEqual([
    { name: 'minute', limit: 300, remaining: 299, reset: expect.any(Number) },
    { name: 'day', limit: 10000, remaining: 9999, reset: expect.any(Number) },
  ]);
  expect((await gatewayGet(b, key.key)).status).toBe(200);
});

it("a consumer's access policy holds for all its keys; an unknown operation id is refused with 400", async () => {
  const consumer = await consumerWithKeys(a, {}, 1);
  expect(
    (await adminRequest(a, 'patch', `/admin/consumers/${consumer.id}`).send({ allowedOperations: ['nope'] })).status,
  ).toBe(400);
  expect(
    (await adminRequest(a, 'patch', `/admin/consumers/${consumer.id}`).send({ allowedOperations: ['getPet'] })).status,
  ).toBe(200);
  await eventually(async () => (await gatewayGet(b, consumer.keys[0]!.key)).status === 403, {
    timeoutMs: 1000,
    what: 'the policy on the other instance',
  });
  const refused = await gatewayGet(b, consumer.keys[0]!.key);
  expect(refused.body).toMatchObject({ code: 'operation_not_allowed', status: 403 });
  expect((await gatewayGet(b, consumer.keys[0]!.key, '/v1/usage')).status).toBe(200);
});

describe('admin answers against openapi-admin.yaml', () => {
  const DOCUMENT_ID = 'https://admin.animalstore.example/openapi-admin.yaml';
  const document = parseYaml(
    fs.readFileSync(path.resolve(__dirname, '..', '..', '..', 'openapi-admin.yaml'), 'utf8'),
  ) as { paths: Record<string, Record<string, { responses: Record<string, { $ref?: string; content?: unknown }> }>> };
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  ajv.addFormat('date-time', true);
  ajv.addSchema(document, DOCUMENT_ID);

  function expectDocumented(method: string, template: string, res: request.Response): void {
    const documented = document.paths[template]?.[method]?.responses[String(res.status)];
    expect({ template, method, status: res.status, documented: documented !== undefined }).toEqual({
      template,
      method,
      status: res.status,
      documented: true,
    });
    if (!res.text) return;
    const pointer = documented!.$ref ?? `#/paths/${template.replace(/\//g, '~1')}/${method}/responses/${res.status}`;
    const validate = ajv.compile({ $ref: `${DOCUMENT_ID}${pointer}/content/application~1json/schema` });
    const ok = validate(JSON.parse(res.text));
    expect({ template, method, errors: ok ? [] : validate.errors }).toEqual({ template, method, errors: [] });
  }

  it('every consumer route, good and bad', async () => {
    const created = await adminRequest(a, 'post', '/admin/consumers').send({
      name: 'Doc',
      limits: { perMonth: 100 },
      billingDay: 3,
      allowedOperations: ['listPets'],
    });
    expectDocumented('post', '/admin/consumers', created);
    const id = created.body.id as string;
    expectDocumented(
      'post',
      '/admin/consumers',
      await adminRequest(a, 'post', '/admin/consumers').send({ name: 'x', limits: { perMinute: -1 } }),
    );
    expectDocumented('get', '/admin/consumers', await adminRequest(a, 'get', '/admin/consumers'));
    const key = await adminRequest(a, 'post', '/admin/keys').send({ name: 'doc', plan: 'free', consumerId: id });
    expectDocumented('post', '/admin/keys', key);
    expectDocumented(
      'post',
      '/admin/keys',
      await adminRequest(a, 'post', '/admin/keys').send({
        name: 'doc',
        plan: 'free',
        consumerId: 'con_000000000000000000000000',
      }),
    );
    expectDocumented('get', '/admin/keys/{id}', await adminRequest(a, 'get', `/admin/keys/${key.body.id}`));
    expectDocumented('get', '/admin/keys', await adminRequest(a, 'get', '/admin/keys'));
    expectDocumented('get', '/admin/consumers/{id}', await adminRequest(a, 'get', `/admin/consumers/${id}`));
    expectDocumented(
      'get',
      '/admin/consumers/{id}',
      await adminRequest(a, 'get', '/admin/consumers/con_000000000000000000000000'),
    );
    expectDocumented(
      'patch',
      '/admin/consumers/{id}',
      await adminRequest(a, 'patch', `/admin/consumers/${id}`).send({ allowedOperations: null }),
    );
    expectDocumented(
      'post',
      '/admin/consumers/{id}/credits',
      await adminRequest(a, 'post', `/admin/consumers/${id}/credits`).send({ units: 10 }),
    );
    expectDocumented('delete', '/admin/consumers/{id}', await adminRequest(a, 'delete', `/admin/consumers/${id}`));
    expectDocumented(
      'patch',
      '/admin/keys/{id}',
      await adminRequest(a, 'patch', `/admin/keys/${key.body.id}`).send({ consumerId: null }),
    );
    expectDocumented('delete', '/admin/consumers/{id}', await adminRequest(a, 'delete', `/admin/consumers/${id}`));
    expectDocumented('get', '/admin/audit', await adminRequest(a, 'get', '/admin/audit?limit=20'));
  });
});
