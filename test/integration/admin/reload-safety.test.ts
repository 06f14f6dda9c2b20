import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import request from 'supertest';
import { admin, startTestProduct, type ProductHarness } from '../gateway/gateway-kit';
import { createKey } from '../../support/keys';

/**
 * Issue 42, reload: CONTRACT §5 POST /admin/reload refuses removing a plan that a key uses and a
 * plan limit below a cost in force after the reload; `costs` reload with the rest (one config in
 * force, never plans checked against costs that are not the ones applied). On Redis and in process.
 */
jest.setTimeout(60_000);

const tempConfig = (yaml: string) => {
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'asg-reload-safety-')), 'extra.yaml');
  fs.writeFileSync(file, yaml);
  return file;
};

describe.each([
  ['on Redis', true],
  ['in process', false],
] as const)('reload %s', (_where, redis) => {
  let configFile: string;
  let product: ProductHarness;
  const reload = () =>
    request(product.adminUrl).post('/admin/reload').set('Authorization', `Bearer ${product.adminToken}`);
  const writeConfig = (yaml: string) => fs.writeFileSync(configFile, yaml);
  const GOLD = 'plans:\n  gold: { perMinute: 50, perDay: 500 }\n';

  beforeAll(async () => {
    configFile = tempConfig(GOLD);
    product = await startTestProduct({ redis, env: { CONFIG_FILE: configFile } });
  });
  afterAll(async () => {
    await product?.close();
  });

  it('refuses removing a plan a key uses, naming the plan, and changes nothing; once no key uses it, it goes', async () => {
    const { id, auth } = await createKey(product, { plan: 'gold' });
    await request(product.gatewayUrl).get('/v1/pets').set('Authorization', auth).expect(200);
    const hashBefore = (await admin(product).get('/admin/config').expect(200)).body.hash as string;

    writeConfig('plans: {}\n');
    const refused = await reload().expect(400);
    expect(refused.body).toMatchObject({ code: 'invalid_config', status: 400, message: expect.any(String) });
    expect(refused.body.errors).toEqual([{ setting: 'plans.gold', message: expect.stringMatching(/used by 1 key/) }]);
    expect((await admin(product).get('/admin/config').expect(200)).body.hash).toBe(hashBefore);
    // The key keeps being served under its plan.
    const served = await request(product.gatewayUrl).get('/v1/pets').set('Authorization', auth).expect(200);
    expect(served.headers['x-ratelimit-limit']).toBe('50');

    // A plan that loses its limits while a key without limits of its own relies on them is refused too.
    writeConfig('plans:\n  gold: {}\n');
    expect((await reload().expect(400)).body.errors).toEqual([
      { setting: 'plans.gold', message: expect.stringMatching(/1 key .*no limits of its own/) },
    ]);

    // A revoked key uses no plan.
    await admin(product).delete(`/admin/keys/${id}`).expect(204);
    writeConfig('plans: {}\n');
    expect((await reload().expect(200)).body).toMatchObject({ result: 'success', restartNeeded: [] });
    writeConfig(GOLD);
    await reload().expect(200);
  });

  it('applies `costs` with the plans: a reload that lowers a plan below the old cost and drops the cost serves the plan (costs is not a restart setting)', async () => {
    writeConfig(
      `${GOLD}  small: { perMinute: 20, perDay: 200 }\ncosts:\n  - { method: POST, path: /pets, cost: 10 }\n`,
    );
    expect((await reload().expect(200)).body.restartNeeded).toEqual([]);
    const { auth } = await createKey(product, { plan: 'small' });
    const post = () =>
      request(product.gatewayUrl).post('/v1/pets').set('Authorization', auth).send({ name: 'Rex', categoryId: 1 });
    const first = await post().expect(201);
    expect(first.headers['x-ratelimit-remaining']).toBe('10');
    // The key service checks a key's own limits against the costs in force too.
    const ownLimits = { name: 'own limits', plan: 'small', limits: { perMinute: 5, perDay: 200 } };
    await expect(product.keyService.create(ownLimits)).rejects.toThrow(/below the largest operation cost 10/);

    // The file's plans checked against the file's costs, and both applied: a 5-unit minute with POST at 1.
    writeConfig(`${GOLD}  small: { perMinute: 5, perDay: 200 }\n`);
    expect((await reload().expect(200)).body.restartNeeded).toEqual([]);
    const fresh = await createKey(product, { plan: 'small' });
    const second = await request(product.gatewayUrl)
      .post('/v1/pets')
      .set('Authorization', fresh.auth)
      .send({ name: 'Rex', categoryId: 1 })
      .expect(201);
    expect([second.headers['x-ratelimit-limit'], second.headers['x-ratelimit-remaining']]).toEqual(['5', '4']);
    await expect(product.keyService.create(ownLimits)).resolves.toMatchObject({
      record: { plan: 'small', limits: { perMinute: 5, perDay: 200 } },
    });
    // The first key took 10 units of this minute before; its limit is now 5: refused with a Retry-After, never a 500.
    const over = await post();
    expect([201, 429]).toContain(over.status);

    // A cost above a plan's limit is refused whole, naming the plan's window.
    writeConfig(`${GOLD}  small: { perMinute: 5, perDay: 200 }\ncosts:\n  - { method: POST, path: /pets, cost: 6 }\n`);
    const refused = await reload().expect(400);
    expect(refused.body.errors).toEqual(
      expect.arrayContaining([
        { setting: 'plans.small.perMinute', message: expect.stringMatching(/below the cost 6 of POST \/pets/) },
      ]),
    );
    writeConfig(GOLD + '  small: { perMinute: 5, perDay: 200 }\n');
    await reload().expect(200);
  });

  it('the metrics follow the config in force: a plan a reload adds is counted under its own name, never `other`', async () => {
    writeConfig(`${GOLD}  small: { perMinute: 5, perDay: 200 }\n  silver: { perMinute: 30, perDay: 300 }\n`);
    await reload().expect(200);
    const { auth } = await createKey(product, { plan: 'silver' });
    await request(product.gatewayUrl).get('/v1/pets').set('Authorization', auth).expect(200);
    const scrape = (await request(product.adminUrl).get('/metrics').expect(200)).text;
    expect(scrape).toMatch(/^gateway_http_requests_total\{[^}]*plan="silver"[^}]*\} 1$/m);
    expect(scrape).not.toMatch(/^gateway_http_requests_total\{[^}]*plan="other"/m);
  });
});

describe.each([
  ['on Redis', true],
  ['in process', false],
] as const)('a key whose plan is not configured any more (a restart without it) %s', (_where, redis) => {
  it('is answered 503 service_unavailable with the Error body, never a 500; the admin API shows it and can move it', async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'asg-lost-plan-'));
    const namespace = `asg:lost-plan:${process.pid}:${Date.now()}`;
    const before = await startTestProduct({
      redis,
      dataDir,
      namespace,
      overrides: { plans: { gold: { perMinute: 50, perDay: 500 } } },
    });
    const { id, auth } = await createKey(before, { plan: 'gold' });
    await before.close();

    const product = await startTestProduct({ redis, dataDir, namespace });
    try {
      for (const path of ['/v1/pets', '/v1/usage']) {
        const res = await request(product.gatewayUrl).get(path).set('Authorization', auth);
        expect({ status: res.status, body: res.body }).toEqual({
          status: 503,
          body: { code: 'service_unavailable', message: expect.any(String), status: 503 },
        });
        expect(res.headers['x-request-id']).toEqual(expect.any(String));
        expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
      }
      const shown = await admin(product).get(`/admin/keys/${id}`).expect(200);
      expect(shown.body).toMatchObject({ id, plan: 'gold', limits: null, usage: null });
      await admin(product).patch(`/admin/keys/${id}`, { plan: 'pro' }).expect(200);
      await request(product.gatewayUrl).get('/v1/pets').set('Authorization', auth).expect(200);
      expect(product.logs.text()).toMatch(/"plan":"gold".*not configured/);
    } finally {
      await product.close();
    }
  });
});
