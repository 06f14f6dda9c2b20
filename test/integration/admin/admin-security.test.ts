import request from 'supertest';
import { startTestProduct, type ProductHarness } from '../../support/product-harness';
import { adminRequest, gatewayGet, logRecords, sha256Hex, type AdminMethod } from './admin-kit';
import { expectError } from '../../support/errors';
import { createKey } from '../../support/keys';

/**
 * The admin API's security side: every /admin route needs the admin token (compared in constant
 * time: src/admin/app.ts hashes both sides with SHA-256 and compares with timingSafeEqual, so a
 * test can only check that every wrong token, whatever its length, is refused), keys and hashes
 * never leave it after creation, and neither keys nor the token reach the logs.
 */

let product: ProductHarness;

beforeAll(async () => {
  // This suite sends dozens of wrong tokens on purpose; the lockout has its own suite below.
  product = await startTestProduct({
    overrides: { admin: { failedTokensPerMinute: 1000, failedTokensPerMinuteTotal: 1000 } },
  });
});

afterAll(async () => {
  await product.close();
});

const adminRoutes: Array<[AdminMethod, string]> = [
  ['get', '/admin/keys'],
  ['post', '/admin/keys'],
  ['get', '/admin/keys/key_000000000000000000000000'],
  ['patch', '/admin/keys/key_000000000000000000000000'],
  ['delete', '/admin/keys/key_000000000000000000000000'],
  ['delete', '/admin/keys/key_000000000000000000000000/ban'],
  ['get', '/admin/no-such-route'],
];

describe('admin token', () => {
  test.each(adminRoutes)('%s %s without Authorization: 401 missing_api_key', async (method, path) => {
    const res = await request(product.adminUrl)[method](path);
    expectError(res, 401, 'missing_api_key');
  });

  test.each(adminRoutes)('%s %s with a wrong token: 401 invalid_api_key', async (method, path) => {
    const res = await request(product.adminUrl)[method](path).set('Authorization', 'Bearer not-the-admin-token');
    expectError(res, 401, 'invalid_api_key');
  });

  test('wrong tokens of every length, and other schemes, are refused alike', async () => {
    const token = product.adminToken;
    const lastChanged = token.slice(0, -1) + (token.endsWith('a') ? 'b' : 'a');
    const headers = [
      'Bearer x',
      `Bearer ${token.slice(0, 1)}`,
      `Bearer ${token.slice(0, -1)}`,
      `Bearer ${lastChanged}`,
      `Bearer ${token}x`,
      `Bearer ${token}${token}`,
      `Bearer ${'a'.repeat(4000)}`,
      `Bearer ${token.toUpperCase() === token ? token.toLowerCase() : token.toUpperCase()}`,
      `Basic ${Buffer.from(`admin:${token}`).toString('base64')}`,
      token,
      `Bearer ${token} extra`,
      'Bearer',
    ];
    const answers = [];
    for (const authorization of headers) {
      const res = await request(product.adminUrl).get('/admin/keys').set('Authorization', authorization);
      answers.push({
        authorization: authorization.slice(0, 40),
        status: res.status,
        code: (res.body as { code?: string }).code,
      });
    }
    expect(answers).toEqual(
      headers.map((authorization) => ({
        authorization: authorization.slice(0, 40),
        status: 401,
        code: 'invalid_api_key',
      })),
    );
  });

  test('the right token is accepted, with the scheme in any case', async () => {
    await adminRequest(product, 'get', '/admin/keys').expect(200);
    const res = await request(product.adminUrl).get('/admin/keys').set('Authorization', `bearer ${product.adminToken}`);
    expect(res.status).toBe(200);
  });

  test('a wrong token is refused before the body is looked at', async () => {
    const res = await request(product.adminUrl)
      .post('/admin/keys')
      .set('Authorization', 'Bearer wrong')
      .set('Content-Type', 'application/json')
      .send('{not json');
    expectError(res, 401, 'invalid_api_key');
  });
});

describe('keys and hashes never leave the admin API after creation', () => {
  test('GET /admin/keys and GET /admin/keys/{id} show neither a key nor its hash', async () => {
    const created = await createKey(product, { name: 'secret holder', plan: 'free' }, { overApi: true });
    await gatewayGet(product, created.key).expect(200);
    const hash = sha256Hex(created.key);

    const list = await adminRequest(product, 'get', '/admin/keys').expect(200);
    const one = await adminRequest(product, 'get', `/admin/keys/${created.id}`).expect(200);
    for (const text of [list.text, one.text]) {
      expect(text).not.toContain(created.key);
      expect(text).not.toContain(created.key.slice(-20));
      expect(text).not.toContain(hash);
    }
    const items = list.body as Array<Record<string, unknown>>;
    for (const item of items) {
      expect(Object.keys(item).sort()).toEqual([
        'allowedAddresses',
        'allowedOperations',
        'consumerId',
        'createdAt',
        'expiresAt',
        'id',
        'lastUsedAt',
        'limits',
        'name',
        'plan',
        'revokedAt',
      ]);
      for (const value of Object.values(item)) {
        expect(JSON.stringify(value)).not.toContain(hash);
        expect(JSON.stringify(value)).not.toContain(created.key);
      }
    }
    expect(Object.keys(one.body as object).sort()).toEqual([
      'allowedAddresses',
      'allowedOperations',
      'bannedUntil',
      'consumerId',
      'createdAt',
      'expiresAt',
      'id',
      'lastUsedAt',
      'limits',
      'name',
      'plan',
      'previousKeyExpiresAt',
      'revokedAt',
      'usage',
    ]);
  });

  test('after a rotation neither secret nor either hash is in any answer but the rotation itself', async () => {
    const created = await createKey(product, { name: 'rotated secretly', plan: 'free' }, { overApi: true });
    const rotated = await adminRequest(product, 'post', `/admin/keys/${created.id}/rotate`)
      .send({ graceSeconds: 60 })
      .expect(201);
    const newKey = (rotated.body as { key: string }).key;
    expect(rotated.text).not.toContain(created.key);
    expect(rotated.text).not.toContain(sha256Hex(created.key));
    expect(rotated.text).not.toContain(sha256Hex(newKey));
    const answers = await Promise.all([
      adminRequest(product, 'get', '/admin/keys'),
      adminRequest(product, 'get', `/admin/keys/${created.id}`),
      adminRequest(product, 'get', '/admin/audit?limit=1000'),
      adminRequest(product, 'get', `/admin/keys/${created.id}/usage`),
    ]);
    for (const res of answers) {
      expect(res.status).toBe(200);
      for (const secret of [created.key, newKey]) {
        expect(res.text).not.toContain(secret);
        expect(res.text).not.toContain(sha256Hex(secret));
      }
    }
    for (const secret of [created.key, newKey]) expect(product.logs.text()).not.toContain(sha256Hex(secret));
  });

  test('PATCH answers without the key or its hash', async () => {
    const created = await createKey(product, { name: 'patched', plan: 'free' }, { overApi: true });
    const res = await adminRequest(product, 'patch', `/admin/keys/${created.id}`).send({ name: 'renamed' }).expect(200);
    expect(Object.keys(res.body as object).sort()).toEqual([
      'allowedAddresses',
      'allowedOperations',
      'consumerId',
      'createdAt',
      'expiresAt',
      'id',
      'lastUsedAt',
      'limits',
      'name',
      'plan',
      'revokedAt',
    ]);
    expect(res.text).not.toContain(created.key);
    expect(res.text).not.toContain(sha256Hex(created.key));
  });
});

describe('logs', () => {
  test('admin actions are logged with the action and key id; the admin token and keys never are', async () => {
    const created = await createKey(
      product,
      { name: 'audited', plan: 'free', limits: { perMinute: 1, perDay: 10 } },
      { overApi: true },
    );
    await gatewayGet(product, created.key).expect(200);
    await gatewayGet(product, created.key).expect(429);
    await adminRequest(product, 'patch', `/admin/keys/${created.id}`).send({ plan: 'pro' }).expect(200);
    await adminRequest(product, 'delete', `/admin/keys/${created.id}/ban`).expect(204);
    await adminRequest(product, 'delete', `/admin/keys/${created.id}`).expect(204);
    // Failed attempts carry tokens too: neither the wrong one nor the right one may be logged.
    await request(product.adminUrl)
      .get('/admin/keys')
      .set('Authorization', 'Bearer wrong-token-that-must-not-be-logged');
    await request(product.gatewayUrl).get('/v1/pets').set('Authorization', `Bearer ${created.key}`);

    const audit = logRecords(product)
      .filter((r) => r.keyId === created.id && typeof r.action === 'string')
      .map((r) => r.action);
    expect(audit).toEqual(['create', 'update', 'unban', 'revoke']);

    const text = product.logs.text();
    expect(text).not.toContain(product.adminToken);
    expect(text).not.toContain('wrong-token-that-must-not-be-logged');
    expect(text).not.toContain(created.key);
    expect(text).not.toContain(created.key.slice(-20));
    expect(text).not.toContain(sha256Hex(created.key));
  });
});
