import request from 'supertest';
import { useRedisPerFile } from '../../support/redis-per-file';
import { uniqueNamespace } from '../../support/test-redis';
import { expectMatchesOpenApi } from '../../support/openapi';
import {
  RATE_LIMIT_HEADERS,
  admin,
  header,
  startTestProduct,
  usageOf,
  watchInventory,
  type ProductHarness,
} from './gateway-kit';
import { eventually } from '../../support/eventually';
import { expectError } from '../../support/errors';
import { createKey } from '../../support/keys';
import { logEntries, scrape, total } from './listener-kit';
import { commandsDuring, naming } from '../../support/redis-command-log';

/**
 * Access policies through the whole product (CONTRACT §4, issue 39): real HTTP on loopback, on a
 * redis-server of this suite's own (INFO commandstats counts every command) and in process. The
 * products trust 127.0.0.1 as a proxy, so X-Forwarded-For from the test names the client.
 */

jest.setTimeout(120_000);

const overrides = { server: { host: '127.0.0.1', trustedProxies: ['127.0.0.1'] }, anonymous: { perMinute: 1000 } };

const redis = useRedisPerFile();
describe.each([
  ['on Redis', true],
  ['in process', false],
])('access policy %s', (_label, onRedis) => {
  let product: ProductHarness;
  const namespace = uniqueNamespace('access');

  beforeAll(async () => {
    product = await startTestProduct(
      onRedis ? { redisUrl: redis.url, namespace, overrides } : { redis: false, overrides },
    );
  });

  /**
   * What `act` sent Redis that names this product's keys: the limiter's (`:rl:`) and the key
   * lookups (`:keys:`). The product's background work (usage flush, loss checks) names others or
   * runs on its own timer, so the window is judged by names, not by a count of every command.
   */
  const redisTraffic = async (act: () => Promise<unknown>) => {
    if (!onRedis) {
      await act();
      return { limiter: [], keyLookups: [] };
    }
    const commands = await commandsDuring(redis.url, act);
    return {
      limiter: naming(commands, `${namespace}:rl:`),
      keyLookups: naming(commands, `${namespace}:keys:{k}:by-hash`).filter(([name]) => name === 'hget'),
    };
  };

  afterAll(async () => {
    await product?.close();
  });

  const bearer = () => `Bearer ${product.adminToken}`;
  const adminPost = (path: string, body: object) =>
    request(product.adminUrl).post(path).set('Authorization', bearer()).send(body);
  const gateway = () => request(product.gatewayUrl);

  const createPolicyKey = (body: object) =>
    createKey(product, { name: 'policy key', plan: 'free', ...body }, { overApi: true });

  it('a key limited to listPets lists pets, and gets 403 operation_not_allowed for createPet and getPet without spending a unit', async () => {
    const key = await createPolicyKey({ allowedOperations: ['listPets'] });
    expect(key.body).toMatchObject({ allowedOperations: ['listPets'], allowedAddresses: null });
    const listed = await gateway().get('/v1/pets?limit=1').set('Authorization', key.auth).expect(200);
    const remainingAfterList = Number(header(listed, 'x-ratelimit-remaining'));
    const before = await usageOf(product, key.id);
    const inventory = watchInventory(product);
    let created!: request.Response, fetched!: request.Response, headed!: request.Response;
    const traffic = await redisTraffic(async () => {
      created = await gateway().post('/v1/pets').set('Authorization', key.auth).send({ name: 'Rex' });
      fetched = await gateway().get('/v1/pets/1').set('Authorization', key.auth);
      headed = await gateway().head('/v1/pets/1').set('Authorization', key.auth);
    });

    // The key is cached from the listing, and a refused operation counts nothing: no command.
    expect(traffic).toEqual({ limiter: [], keyLookups: [] });
    expect(inventory.count()).toBe(0);
    for (const res of [created, fetched]) {
      expectError(res, 403, 'operation_not_allowed');
      // No rate-limit headers: nothing was counted (CONTRACT §4).
      for (const name of RATE_LIMIT_HEADERS) expect(header(res, name)).toBeUndefined();
      expect(header(res, 'x-request-id')).toBeDefined();
    }
    expect(headed.status).toBe(403);
    expect(await usageOf(product, key.id)).toEqual(before);
    expect(before.minute.remaining).toBe(remainingAfterList);
    // GET /v1/usage is always allowed, and says nothing was spent.
    const usage = await gateway().get('/v1/usage').set('Authorization', key.auth).expect(200);
    expect(usage.body.windows[0]).toMatchObject({ name: 'minute', remaining: remainingAfterList });
    expectMatchesOpenApi('POST', '/pets', created);
    expectMatchesOpenApi('GET', '/pets/{petId}', fetched);

    expect(
      total(await scrape(product, 'gateway_access_denied_total'), { reason: 'operation', plan: 'free' }),
    ).toBeGreaterThanOrEqual(3);
    const logged = logEntries(product).filter(
      (entry) => entry.msg === 'request refused by access policy' && entry.keyId === key.id,
    );
    expect(logged.map((entry) => entry.operationId)).toEqual(['createPet', 'getPet', 'getPet']);
    expect(product.logs.text()).not.toContain(key.auth.slice('Bearer '.length));
  });

  it('a key limited to 10.0.0.0/8 is refused from loopback with 403 address_not_allowed, and served through a trusted proxy for 10.1.2.3', async () => {
    const key = await createPolicyKey({ allowedAddresses: ['10.0.0.0/8'] });
    const inventory = watchInventory(product);
    let refused!: request.Response, refusedAgain!: request.Response;
    const traffic = await redisTraffic(async () => {
      refused = await gateway().get('/v1/pets').set('Authorization', key.auth);
      refusedAgain = await gateway().get('/v1/pets').set('Authorization', key.auth).set('X-Forwarded-For', '192.0.2.1');
    });
    expectError(refused, 403, 'address_not_allowed');
    expectError(refusedAgain, 403, 'address_not_allowed');
    // The first request resolved the key (a cache miss, at most one lookup); nothing was counted.
    expect(traffic.limiter).toEqual([]);
    expect(traffic.keyLookups.length).toBeLessThanOrEqual(1);
    expect(inventory.count()).toBe(0);
    expect((await usageOf(product, key.id)).day.remaining).toBe(1000);

    await gateway().get('/v1/pets').set('Authorization', key.auth).set('X-Forwarded-For', '10.1.2.3').expect(200);
    await gateway().get('/v1/usage').set('Authorization', key.auth).expect(200);
    expect((await usageOf(product, key.id)).day.remaining).toBe(999);
    expect(
      total(await scrape(product, 'gateway_access_denied_total'), { reason: 'address', plan: 'free' }),
    ).toBeGreaterThanOrEqual(2);
  });

  it('IPv6 and IPv4-mapped clients through the proxy match the lists of their family', async () => {
    const key = await createPolicyKey({ allowedAddresses: ['2001:db8::/32', '::ffff:192.0.2.0/120'] });
    await gateway().get('/v1/pets').set('Authorization', key.auth).set('X-Forwarded-For', '2001:db8::7').expect(200);
    await gateway().get('/v1/pets').set('Authorization', key.auth).set('X-Forwarded-For', '192.0.2.44').expect(200);
    expectError(
      await gateway().get('/v1/pets').set('Authorization', key.auth).set('X-Forwarded-For', '2001:db9::7'),
      403,
      'address_not_allowed',
    );
    expect((await admin(product).get(`/admin/keys/${key.id}`).expect(200)).body.allowedAddresses).toEqual([
      '2001:db8::/32',
      '192.0.2.0/24',
    ]);
  });

  it.each([
    ['allowedAddresses', ['10.0.0.0/8', '300.1.1.1/8'], '300.1.1.1/8'],
    ['allowedAddresses', ['10.0.0.0/33'], '10.0.0.0/33'],
    ['allowedAddresses', ['::1/129'], '::1/129'],
    ['allowedAddresses', ['partner.example.com'], 'partner.example.com'],
    ['allowedOperations', ['listPets', 'deletePet'], 'deletePet'],
  ])('refuses %s %j with 400 naming %s, on create and on PATCH', async (field, list, bad) => {
    const created = await adminPost('/admin/keys', { name: 'bad', plan: 'free', [field]: list });
    expectError(created, 400, 'validation_failed');
    expect(created.body.message).toContain(JSON.stringify(bad));
    const key = await createPolicyKey({});
    const patched = await admin(product).patch(`/admin/keys/${key.id}`, { [field]: list });
    expectError(patched, 400, 'validation_failed');
    expect(patched.body.message).toContain(JSON.stringify(bad));
  });

  it('refuses an empty list (null removes one) and more than 100 entries', async () => {
    const empty = await adminPost('/admin/keys', { name: 'bad', plan: 'free', allowedOperations: [] });
    expectError(empty, 400, 'validation_failed');
    expect(empty.body.message).toContain('null');
    const many = Array.from({ length: 101 }, (_, i) => `10.${i}.0.0/16`);
    expectError(
      await adminPost('/admin/keys', { name: 'bad', plan: 'free', allowedAddresses: many }),
      400,
      'validation_failed',
    );
  });

  it('a PATCH sets and removes lists, takes effect at once, and is audited', async () => {
    const key = await createPolicyKey({});
    await gateway().get('/v1/pets').set('Authorization', key.auth).expect(200);
    const set = await admin(product)
      .patch(`/admin/keys/${key.id}`, { allowedOperations: ['getPet'] })
      .expect(200);
    expect(set.body).toMatchObject({ allowedOperations: ['getPet'], allowedAddresses: null });
    expectError(await gateway().get('/v1/pets').set('Authorization', key.auth), 403, 'operation_not_allowed');
    const removed = await admin(product).patch(`/admin/keys/${key.id}`, { allowedOperations: null }).expect(200);
    expect(removed.body.allowedOperations).toBeNull();
    await gateway().get('/v1/pets').set('Authorization', key.auth).expect(200);
    const audit = await admin(product).get('/admin/audit?limit=10').expect(200);
    const updates = (
      audit.body.entries as Array<{ action: string; keyId: string; details: Record<string, unknown> }>
    ).filter((e) => e.keyId === key.id && e.action === 'update');
    expect(updates.map((e) => e.details)).toEqual([{ allowedOperations: null }, { allowedOperations: ['getPet'] }]);
  });

  it('export and import carry the lists', async () => {
    const key = await createPolicyKey({
      allowedOperations: ['listPets', 'getPet'],
      allowedAddresses: ['192.0.2.0/24'],
    });
    const exported = await admin(product).get('/admin/keys/export').expect(200);
    const line = exported.text.split('\n').find((l) => l.includes(key.id))!;
    expect(JSON.parse(line)).toMatchObject({
      allowedOperations: ['listPets', 'getPet'],
      allowedAddresses: ['192.0.2.0/24'],
    });
    await admin(product)
      .patch(`/admin/keys/${key.id}`, { allowedOperations: null, allowedAddresses: null })
      .expect(200);
    const imported = await request(product.adminUrl)
      .post('/admin/keys/import')
      .set('Authorization', bearer())
      .set('Content-Type', 'application/x-ndjson')
      .send(line)
      .expect(200);
    expect(imported.body).toEqual({ imported: 1, unchanged: 0 });
    expect((await admin(product).get(`/admin/keys/${key.id}`).expect(200)).body).toMatchObject({
      allowedOperations: ['listPets', 'getPet'],
      allowedAddresses: ['192.0.2.0/24'],
    });
    expectError(
      await gateway()
        .post('/v1/pets')
        .set('Authorization', key.auth)
        .set('X-Forwarded-For', '192.0.2.9')
        .send({ name: 'Rex' }),
      403,
      'operation_not_allowed',
    );

    const bad = JSON.stringify({ ...JSON.parse(line), allowedAddresses: ['10.0.0.0/33'] });
    const refused = await request(product.adminUrl)
      .post('/admin/keys/import')
      .set('Authorization', bearer())
      .set('Content-Type', 'application/x-ndjson')
      .send(bad);
    expectError(refused, 400, 'validation_failed');
    expect(refused.body.message).toContain('10.0.0.0/33');
  });
});

describe('access policy across instances on one Redis', () => {
  let a: ProductHarness;
  let b: ProductHarness;

  beforeAll(async () => {
    const namespace = uniqueNamespace('access-pair');
    a = await startTestProduct({ redisUrl: redis.url, namespace, overrides });
    b = await startTestProduct({ redisUrl: redis.url, namespace, overrides });
  });

  afterAll(async () => {
    await Promise.all([a?.close(), b?.close()]);
  });

  it('a policy set on one instance refuses on the other within 1 s', async () => {
    const created = await request(a.adminUrl)
      .post('/admin/keys')
      .set('Authorization', `Bearer ${a.adminToken}`)
      .send({ name: 'pair', plan: 'free' })
      .expect(201);
    const auth = `Bearer ${created.body.key as string}`;
    // B caches the record.
    await request(b.gatewayUrl).get('/v1/pets').set('Authorization', auth).expect(200);
    await admin(a)
      .patch(`/admin/keys/${created.body.id as string}`, { allowedAddresses: ['10.0.0.0/8'] })
      .expect(200);
    // CONTRACT §4: policy changes take effect on every instance within 1 second.
    await eventually(
      async () =>
        (await request(b.gatewayUrl).get('/v1/usage').set('Authorization', auth)).status === 200 &&
        (await request(b.gatewayUrl).get('/v1/pets').set('Authorization', auth)).status === 403,
      { timeoutMs: 1000, what: 'instance B refusing the key from loopback' },
    );
  });
});
