import request from 'supertest';
import { startTestProduct, type ProductHarness } from '../../support/product-harness';
import { adminRequest, gatewayGet, ISO_INSTANT, KEY_ID } from './admin-kit';
import { eventually } from '../../support/eventually';
import { expectError } from '../../support/errors';
import { createKey } from '../../support/keys';

/** The key routes of the admin API (CONTRACT §5): every status each one answers, and its effect at the gateway. */

let product: ProductHarness;

beforeAll(async () => {
  product = await startTestProduct();
});

afterAll(async () => {
  await product.close();
});

const UNKNOWN_ID = 'key_000000000000000000000000';

/** The minute quota the gateway applies to `key`, read from RateLimit-Policy. */
async function minuteQuotaAtGateway(key: string): Promise<number> {
  const res = await gatewayGet(product, key).expect(200);
  const match = /"minute";q=(\d+)/.exec(String(res.headers['ratelimit-policy']));
  if (!match) throw new Error(`no minute policy in ${String(res.headers['ratelimit-policy'])}`);
  return Number(match[1]);
}

describe('POST /admin/keys', () => {
  test('201 with {id, key, name, plan, limits, createdAt}; the key works at the gateway at once', async () => {
    const before = Date.now();
    const res = await adminRequest(product, 'post', '/admin/keys').send({ name: 'shop front', plan: 'free' });
    expect(res.status).toBe(201);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    expect(res.body).toEqual({
      id: expect.stringMatching(KEY_ID),
      key: expect.stringMatching(/^asg_dev_[0-9A-Za-z]{22,}$/),
      name: 'shop front',
      plan: 'free',
      limits: { perMinute: 60, perDay: 1000 },
      createdAt: expect.stringMatching(ISO_INSTANT),
      expiresAt: null,
      consumerId: null,
      allowedOperations: null,
      allowedAddresses: null,
    });
    const createdAt = Date.parse((res.body as { createdAt: string }).createdAt);
    expect(createdAt).toBeGreaterThanOrEqual(before - 1000);
    expect(createdAt).toBeLessThanOrEqual(Date.now() + 1000);

    const pets = await gatewayGet(product, (res.body as { key: string }).key);
    expect(pets.status).toBe(200);
    expect(pets.headers['ratelimit-policy']).toBe('"minute";q=60;w=60, "day";q=1000;w=86400');
  });

  test('each plan of config/default.yaml, and enterprise with its own limits', async () => {
    const pro = await createKey(product, { name: 'pro', plan: 'pro' }, { overApi: true });
    const business = await createKey(product, { name: 'business', plan: 'business' }, { overApi: true });
    const enterprise = await createKey(
      product,
      { name: 'enterprise', plan: 'enterprise', limits: { perMinute: 5000, perDay: 2_000_000 } },
      { overApi: true },
    );
    const overridden = await createKey(
      product,
      { name: 'free with more', plan: 'free', limits: { perMinute: 7, perDay: 70 } },
      { overApi: true },
    );
    expect([pro, business, enterprise, overridden].map((k) => [k.plan, k.limits])).toEqual([
      ['pro', { perMinute: 300, perDay: 10000 }],
      ['business', { perMinute: 1000, perDay: 100000 }],
      ['enterprise', { perMinute: 5000, perDay: 2_000_000 }],
      ['free', { perMinute: 7, perDay: 70 }],
    ]);
    expect(await minuteQuotaAtGateway(enterprise.key)).toBe(5000);
    expect(await minuteQuotaAtGateway(overridden.key)).toBe(7);
    // Keys are never reused.
    expect(new Set([pro, business, enterprise, overridden].map((k) => k.key)).size).toBe(4);
  });

  test.each([
    ['an unknown plan', { name: 'x', plan: 'gold' }],
    ['enterprise without limits', { name: 'x', plan: 'enterprise' }],
    ['enterprise with limits null', { name: 'x', plan: 'enterprise', limits: null }],
    ['limits of zero', { name: 'x', plan: 'free', limits: { perMinute: 0, perDay: 10 } }],
    ['negative limits', { name: 'x', plan: 'free', limits: { perMinute: -1, perDay: 10 } }],
    ['fractional limits', { name: 'x', plan: 'free', limits: { perMinute: 1.5, perDay: 10 } }],
    ['limits as strings', { name: 'x', plan: 'free', limits: { perMinute: '10', perDay: '100' } }],
    ['limits without perDay', { name: 'x', plan: 'free', limits: { perMinute: 10 } }],
    ['an unknown field in limits', { name: 'x', plan: 'free', limits: { perMinute: 10, perDay: 100, perHour: 5 } }],
    ['limits as a number', { name: 'x', plan: 'free', limits: 10 }],
    ['an unknown field', { name: 'x', plan: 'free', owner: 'someone' }],
    ['a client-chosen key', { name: 'x', plan: 'free', key: 'asg_dev_0123456789abcdefghijklmnop' }],
    ['no name', { plan: 'free' }],
    ['an empty name', { name: '   ', plan: 'free' }],
    ['a name that is not a string', { name: 42, plan: 'free' }],
    ['no plan', { name: 'x' }],
    ['an array body', [{ name: 'x', plan: 'free' }]],
    ['a JSON string body', 'free'],
  ])('400 validation_failed for %s', async (_label, body) => {
    const before = (await adminRequest(product, 'get', '/admin/keys').expect(200)).body as unknown[];
    const res = await adminRequest(product, 'post', '/admin/keys')
      .set('Content-Type', 'application/json')
      .send(JSON.stringify(body));
    expectError(res, 400, 'validation_failed');
    const after = (await adminRequest(product, 'get', '/admin/keys').expect(200)).body as unknown[];
    expect(after).toHaveLength(before.length);
  });

  test('400 invalid_json for malformed JSON', async () => {
    const res = await adminRequest(product, 'post', '/admin/keys')
      .set('Content-Type', 'application/json')
      .send('{"name": "x", "plan": ');
    expectError(res, 400, 'invalid_json');
  });

  test('400 for an empty body', async () => {
    const res = await adminRequest(product, 'post', '/admin/keys').set('Content-Type', 'application/json').send('');
    expectError(res, 400, 'validation_failed');
  });

  test.each([
    ['text/plain', 'name=x&plan=free'],
    ['application/x-www-form-urlencoded', 'name=x&plan=free'],
    ['application/xml', '<key><name>x</name></key>'],
  ])('415 unsupported_media_type for %s', async (contentType, body) => {
    const res = await adminRequest(product, 'post', '/admin/keys').set('Content-Type', contentType).send(body);
    expectError(res, 415, 'unsupported_media_type');
  });

  test('413 payload_too_large for a body over 16 KiB; exactly 16 KiB is read', async () => {
    const bodyOfLength = (length: number) => {
      const skeleton = JSON.stringify({ name: '', plan: 'free' });
      return JSON.stringify({ name: 'n'.repeat(length - skeleton.length), plan: 'free' });
    };
    const tooLarge = await adminRequest(product, 'post', '/admin/keys')
      .set('Content-Type', 'application/json')
      .send(bodyOfLength(16 * 1024 + 1));
    expectError(tooLarge, 413, 'payload_too_large');
    // 16 KiB exactly passes the size check and fails only on the 200-character name limit.
    const atLimit = await adminRequest(product, 'post', '/admin/keys')
      .set('Content-Type', 'application/json')
      .send(bodyOfLength(16 * 1024));
    expectError(atLimit, 400, 'validation_failed');
  });
});

describe('GET /admin/keys', () => {
  test('200 array of {id, name, plan, limits, createdAt, revokedAt}, revoked keys included', async () => {
    const kept = await createKey(product, { name: 'listed', plan: 'pro' }, { overApi: true });
    const revoked = await createKey(
      product,
      { name: 'listed then revoked', plan: 'free', limits: { perMinute: 3, perDay: 30 } },
      { overApi: true },
    );
    await adminRequest(product, 'delete', `/admin/keys/${revoked.id}`).expect(204);

    const res = await adminRequest(product, 'get', '/admin/keys').expect(200);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    const items = res.body as Array<Record<string, unknown>>;
    expect(Array.isArray(items)).toBe(true);
    expect(items.find((k) => k.id === kept.id)).toEqual({
      id: kept.id,
      name: 'listed',
      plan: 'pro',
      limits: { perMinute: 300, perDay: 10000 },
      createdAt: kept.createdAt,
      revokedAt: null,
      expiresAt: null,
      consumerId: null,
      allowedOperations: null,
      allowedAddresses: null,
      lastUsedAt: null,
    });
    expect(items.find((k) => k.id === revoked.id)).toEqual({
      id: revoked.id,
      name: 'listed then revoked',
      plan: 'free',
      limits: { perMinute: 3, perDay: 30 },
      createdAt: revoked.createdAt,
      revokedAt: expect.stringMatching(ISO_INSTANT),
      expiresAt: null,
      consumerId: null,
      allowedOperations: null,
      allowedAddresses: null,
      lastUsedAt: null,
    });
  });
});

describe('GET /admin/keys/{id}', () => {
  test('200 with the key, its usage and bannedUntil null', async () => {
    const created = await createKey(product, { name: 'shown', plan: 'free' }, { overApi: true });
    const res = await adminRequest(product, 'get', `/admin/keys/${created.id}`).expect(200);
    expect(res.body).toEqual({
      id: created.id,
      name: 'shown',
      plan: 'free',
      limits: { perMinute: 60, perDay: 1000 },
      createdAt: created.createdAt,
      revokedAt: null,
      expiresAt: null,
      consumerId: null,
      allowedOperations: null,
      allowedAddresses: null,
      lastUsedAt: null,
      usage: {
        minute: { limit: 60, remaining: 60, reset: expect.any(Number) },
        day: { limit: 1000, remaining: 1000, reset: expect.any(Number) },
      },
      bannedUntil: null,
      previousKeyExpiresAt: null,
    });
  });

  test.each([UNKNOWN_ID, 'not-a-key-id', 'asg_dev_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA'])(
    '404 not_found for %s',
    async (id) => {
      const res = await adminRequest(product, 'get', `/admin/keys/${id}`);
      expectError(res, 404, 'not_found');
    },
  );
});

describe('PATCH /admin/keys/{id}', () => {
  test('name: 200 with the updated key', async () => {
    const created = await createKey(product, { name: 'before', plan: 'free' }, { overApi: true });
    const res = await adminRequest(product, 'patch', `/admin/keys/${created.id}`).send({ name: 'after' }).expect(200);
    expect(res.body).toEqual({
      id: created.id,
      name: 'after',
      plan: 'free',
      limits: { perMinute: 60, perDay: 1000 },
      createdAt: created.createdAt,
      revokedAt: null,
      expiresAt: null,
      consumerId: null,
      allowedOperations: null,
      allowedAddresses: null,
      lastUsedAt: null,
    });
    const shown = await adminRequest(product, 'get', `/admin/keys/${created.id}`).expect(200);
    expect((shown.body as { name: string }).name).toBe('after');
  });

  test('plan: 200, and the gateway applies the new plan within 1 second', async () => {
    const created = await createKey(product, { name: 'upgraded', plan: 'free' }, { overApi: true });
    expect(await minuteQuotaAtGateway(created.key)).toBe(60);
    const res = await adminRequest(product, 'patch', `/admin/keys/${created.id}`)
      .send({ plan: 'business' })
      .expect(200);
    expect(res.body).toEqual(
      expect.objectContaining({ plan: 'business', limits: { perMinute: 1000, perDay: 100000 } }),
    );
    await eventually(async () => (await minuteQuotaAtGateway(created.key)) === 1000, { timeoutMs: 1000 });
  });

  test('limits: 200, the gateway applies them, and limits null falls back to the plan', async () => {
    const created = await createKey(product, { name: 'tuned', plan: 'pro' }, { overApi: true });
    const tuned = await adminRequest(product, 'patch', `/admin/keys/${created.id}`)
      .send({ limits: { perMinute: 2, perDay: 20 } })
      .expect(200);
    expect((tuned.body as { limits: unknown }).limits).toEqual({ perMinute: 2, perDay: 20 });
    await eventually(async () => (await minuteQuotaAtGateway(created.key)) === 2, { timeoutMs: 1000 });
    // The third request this minute is over the new limit (at most two were admitted above, but a
    // minute may have turned over in between, so spend what is left and then expect the refusal).
    let res = await gatewayGet(product, created.key);
    for (let spent = 1; res.status === 200 && spent <= 2; spent++) res = await gatewayGet(product, created.key);
    expectError(res, 429, 'rate_limited');

    const cleared = await adminRequest(product, 'patch', `/admin/keys/${created.id}`)
      .send({ limits: null })
      .expect(200);
    expect((cleared.body as { limits: unknown }).limits).toEqual({ perMinute: 300, perDay: 10000 });
    await eventually(async () => (await minuteQuotaAtGateway(created.key)) === 300, { timeoutMs: 1000 });
  });

  test('several fields at once, enterprise with limits', async () => {
    const created = await createKey(product, { name: 'growing', plan: 'free' }, { overApi: true });
    const res = await adminRequest(product, 'patch', `/admin/keys/${created.id}`)
      .send({ name: 'grown', plan: 'enterprise', limits: { perMinute: 4000, perDay: 400000 } })
      .expect(200);
    expect(res.body).toEqual(
      expect.objectContaining({ name: 'grown', plan: 'enterprise', limits: { perMinute: 4000, perDay: 400000 } }),
    );
  });

  test.each([
    ['an unknown plan', { plan: 'gold' }],
    ['enterprise for a key without limits', { plan: 'enterprise' }],
    ['bad limits', { limits: { perMinute: 0, perDay: 1 } }],
    ['limits without perMinute', { limits: { perDay: 1 } }],
    ['an empty name', { name: '' }],
    ['an unknown field', { revokedAt: null }],
    ['a new key', { key: 'asg_dev_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA' }],
  ])('400 validation_failed for %s, and the key is unchanged', async (_label, patch) => {
    const created = await createKey(product, { name: 'steady', plan: 'free' }, { overApi: true });
    const res = await adminRequest(product, 'patch', `/admin/keys/${created.id}`).send(patch);
    expectError(res, 400, 'validation_failed');
    const shown = await adminRequest(product, 'get', `/admin/keys/${created.id}`).expect(200);
    expect(shown.body).toEqual(
      expect.objectContaining({ name: 'steady', plan: 'free', limits: { perMinute: 60, perDay: 1000 } }),
    );
  });

  test('400 for clearing the limits of an enterprise key', async () => {
    const created = await createKey(
      product,
      { name: 'big', plan: 'enterprise', limits: { perMinute: 100, perDay: 1000 } },
      { overApi: true },
    );
    const res = await adminRequest(product, 'patch', `/admin/keys/${created.id}`).send({ limits: null });
    expectError(res, 400, 'validation_failed');
  });

  test('400 invalid_json, 415 for non-JSON', async () => {
    const created = await createKey(product, { name: 'bodies', plan: 'free' }, { overApi: true });
    expectError(
      await adminRequest(product, 'patch', `/admin/keys/${created.id}`)
        .set('Content-Type', 'application/json')
        .send('{"name":'),
      400,
      'invalid_json',
    );
    expectError(
      await adminRequest(product, 'patch', `/admin/keys/${created.id}`)
        .set('Content-Type', 'text/plain')
        .send('name=x'),
      415,
      'unsupported_media_type',
    );
  });

  test('404 not_found for an unknown id', async () => {
    const res = await adminRequest(product, 'patch', `/admin/keys/${UNKNOWN_ID}`).send({ name: 'nobody' });
    expectError(res, 404, 'not_found');
  });
});

describe('DELETE /admin/keys/{id}', () => {
  test('204 with no body; the key gets 401 revoked_api_key within 1 second, and stays listed as revoked', async () => {
    const created = await createKey(product, { name: 'doomed', plan: 'free' }, { overApi: true });
    await gatewayGet(product, created.key).expect(200);
    const res = await adminRequest(product, 'delete', `/admin/keys/${created.id}`);
    expect(res.status).toBe(204);
    expect(res.text).toBe('');
    await eventually(async () => (await gatewayGet(product, created.key)).status === 401, { timeoutMs: 1000 });
    expectError(await gatewayGet(product, created.key), 401, 'revoked_api_key');

    const shown = await adminRequest(product, 'get', `/admin/keys/${created.id}`).expect(200);
    expect((shown.body as { revokedAt: string }).revokedAt).toMatch(ISO_INSTANT);
    // Revoking again is harmless and keeps the first instant.
    await adminRequest(product, 'delete', `/admin/keys/${created.id}`).expect(204);
    const again = await adminRequest(product, 'get', `/admin/keys/${created.id}`).expect(200);
    expect((again.body as { revokedAt: string }).revokedAt).toBe((shown.body as { revokedAt: string }).revokedAt);
  });

  test('404 not_found for an unknown id', async () => {
    expectError(await adminRequest(product, 'delete', `/admin/keys/${UNKNOWN_ID}`), 404, 'not_found');
  });
});

describe('DELETE /admin/keys/{id}/ban', () => {
  test('204 for a key that is not banned; 404 for an unknown id', async () => {
    const created = await createKey(product, { name: 'calm', plan: 'free' }, { overApi: true });
    await adminRequest(product, 'delete', `/admin/keys/${created.id}/ban`).expect(204);
    expectError(await adminRequest(product, 'delete', `/admin/keys/${UNKNOWN_ID}/ban`), 404, 'not_found');
  });
});

describe('other admin paths', () => {
  test('an unknown path with the token is 404 not_found', async () => {
    expectError(await adminRequest(product, 'get', '/admin/nothing-here'), 404, 'not_found');
    expectError(await request(product.adminUrl).get('/nothing-here'), 404, 'not_found');
  });
});
