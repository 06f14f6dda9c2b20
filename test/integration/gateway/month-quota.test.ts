import request from 'supertest';
import { ManualClock } from '../../../src/shared/clock';
import { expectMatchesOpenApi } from '../../support/openapi';
import { expectRateLimitHeaders, header, parseRateLimit, startTestProduct, type ProductHarness } from './gateway-kit';
import { expectError } from '../../support/errors';
import { createKey } from '../../support/keys';

/**
 * Month quotas, credits and costs through the whole product (CONTRACT §4, §5): real HTTP on
 * loopback, on Redis (injected clock, passed to the script) and on the in-process store.
 */

/** 15 March 2026, 12:00:17.5 UTC: billing day 10 is behind us this month, billing day 20 ahead. */
const NOW = Date.UTC(2026, 2, 15, 12, 0, 17, 500);

const overrides = {
  plans: { metered: { perMinute: 100, perDay: 1000, perMonth: 5 } },
  costs: [{ method: 'POST', path: '/pets', cost: 4 }],
  anonymous: { perMinute: 1000 },
};

describe.each([
  ['on Redis', true],
  ['in process', false],
])('month quota, credits and costs %s', (_label, redis) => {
  let product: ProductHarness;
  let clock: ManualClock;

  beforeAll(async () => {
    clock = new ManualClock(NOW);
    product = await startTestProduct({ clock, redis, overrides });
  });

  afterAll(async () => {
    await product?.close();
  });

  beforeEach(() => clock.set(NOW));

  const bearer = () => `Bearer ${product.adminToken}`;
  const adminPost = (path: string, body: object) =>
    request(product.adminUrl).post(path).set('Authorization', bearer()).send(body);
  const adminGet = (path: string) => request(product.adminUrl).get(path).set('Authorization', bearer());
  const pets = (auth: string) => request(product.gatewayUrl).get('/v1/pets?limit=1').set('Authorization', auth);

  it.each([
    [10, Date.UTC(2026, 2, 10), Date.UTC(2026, 3, 10)],
    [20, Date.UTC(2026, 1, 20), Date.UTC(2026, 2, 20)],
  ])(
    'spends a month quota of 5 with billing day %i and refuses until the next billing day',
    async (billingDay, start, end) => {
      const created = await adminPost('/admin/keys', { name: 'm', plan: 'metered', billingDay }).expect(201);
      expect(created.body.billingDay).toBe(billingDay);
      const auth = `Bearer ${created.body.key as string}`;
      for (let i = 0; i < 5; i++) {
        const res = await pets(auth).expect(200);
        const h = expectRateLimitHeaders(res);
        expect(h.policy).toBe(`"minute";q=100;w=60, "day";q=1000;w=86400, "month";q=5;w=${(end - start) / 1000}`);
        expect(parseRateLimit(h.rateLimit).month).toEqual({ remaining: 4 - i, seconds: Math.ceil((end - NOW) / 1000) });
      }
      const refused = await pets(auth);
      expectError(refused, 429, 'rate_limited');
      expect(refused.body.message).toContain('month');
      expect(header(refused, 'retry-after')).toBe(String(Math.ceil((end - NOW) / 1000)));
      expect(header(refused, 'x-ratelimit-reset')).toBe(String(end / 1000));
      expect(header(refused, 'x-ratelimit-remaining')).toBe('0');
      expect(header(refused, 'x-ratelimit-limit')).toBe('5');

      const usage = await request(product.gatewayUrl).get('/v1/usage').set('Authorization', auth).expect(200);
      expect(usage.body.windows).toEqual([
        { name: 'minute', limit: 100, remaining: 95, reset: expect.any(Number) },
        { name: 'day', limit: 1000, remaining: 995, reset: expect.any(Number) },
        { name: 'month', limit: 5, remaining: 0, reset: end / 1000 },
      ]);
      expectMatchesOpenApi('GET', '/usage', usage);

      clock.set(end);
      expect(expectRateLimitHeaders(await pets(auth).expect(200)).rateLimit).toContain('"month";r=4;');
    },
  );

  it('adds exactly the credited units, audited; 409 without a month window or when revoked', async () => {
    const { id, auth } = await createKey(product, { name: 'metered key', ...{ plan: 'metered' } }, { overApi: true });
    for (let i = 0; i < 5; i++) await pets(auth).expect(200);
    expectError(await pets(auth), 429, 'rate_limited');

    const granted = await adminPost(`/admin/keys/${id}/credits`, { units: 3 }).expect(200);
    expect(granted.body.usage.month).toMatchObject({
      limit: 8,
      remaining: 3,
      credits: 3,
      reset: Date.UTC(2026, 3, 1) / 1000,
    });
    for (let i = 0; i < 3; i++) await pets(auth).expect(200);
    expectError(await pets(auth), 429, 'rate_limited');
    const shown = await adminGet(`/admin/keys/${id}`).expect(200);
    expect(shown.body.usage.month).toMatchObject({ limit: 8, remaining: 0, credits: 3 });
    expect(shown.body.billingDay).toBe(1);

    const audit = await adminGet('/admin/audit?limit=5').expect(200);
    expect(audit.body.entries[0]).toMatchObject({
      action: 'credits',
      keyId: id,
      details: { units: 3, month: '2026-03-01T00:00:00.000Z' },
    });

    for (const units of [0, 1_000_000_001, 1.5, '3'])
      expectError(await adminPost(`/admin/keys/${id}/credits`, { units }), 400, 'validation_failed');
    const free = await createKey(product, { name: 'metered key', ...{ plan: 'free' } }, { overApi: true });
    expectError(await adminPost(`/admin/keys/${free.id}/credits`, { units: 3 }), 409, 'conflict');
    await request(product.adminUrl).delete(`/admin/keys/${id}`).set('Authorization', bearer()).expect(204);
    expectError(await adminPost(`/admin/keys/${id}/credits`, { units: 3 }), 409, 'conflict');
    expectError(await adminPost('/admin/keys/key_000000000000000000000000/credits', { units: 3 }), 404, 'not_found');
  });

  it('takes 4 units of every window for POST /v1/pets and refuses it whole when 3 are left', async () => {
    const { auth } = await createKey(
      product,
      { name: 'metered key', ...{ plan: 'enterprise', limits: { perMinute: 7, perDay: 100, perMonth: 1000 } } },
      { overApi: true },
    );
    const post = () =>
      request(product.gatewayUrl).post('/v1/pets').set('Authorization', auth).send({ name: 'Rex', categoryId: 1 });
    const created = await post().expect(201);
    expect(parseRateLimit(expectRateLimitHeaders(created).rateLimit)).toMatchObject({
      minute: { remaining: 3 },
      day: { remaining: 96 },
      month: { remaining: 996 },
    });
    expect(header(created, 'x-ratelimit-remaining')).toBe('3');

    const refused = await post();
    expectError(refused, 429, 'rate_limited');
    expect(header(refused, 'retry-after')).toBe(String(Math.ceil((Date.UTC(2026, 2, 15, 12, 1) - NOW) / 1000)));
    const usage = await request(product.gatewayUrl).get('/v1/usage').set('Authorization', auth).expect(200);
    expect(usage.body.windows.map((w: { remaining: number }) => w.remaining)).toEqual([3, 96, 996]);
    // A GET costs 1: it still fits.
    expect(header(await pets(auth).expect(200), 'x-ratelimit-remaining')).toBe('2');
  });

  it('refuses a key whose own limits are below the largest cost, and bad billing days', async () => {
    const low = await adminPost('/admin/keys', {
      name: 'low',
      plan: 'enterprise',
      limits: { perMinute: 3, perDay: 100 },
    });
    expectError(low, 400, 'validation_failed');
    expect(low.body.message).toContain('perMinute is 3');
    const { id } = await createKey(product, { name: 'metered key', ...{ plan: 'free' } }, { overApi: true });
    const patched = await request(product.adminUrl)
      .patch(`/admin/keys/${id}`)
      .set('Authorization', bearer())
      .send({ limits: { perMinute: 10, perDay: 10, perMonth: 2 } });
    expectError(patched, 400, 'validation_failed');
    expect(patched.body.message).toContain('perMonth is 2');
    for (const billingDay of [0, 29, 31, 2.5])
      expectError(await adminPost('/admin/keys', { name: 'b', plan: 'free', billingDay }), 400, 'validation_failed');
  });

  it.each([
    ['free', 60, 1000],
    ['pro', 300, 10000],
    ['business', 1000, 100000],
  ])(
    'leaves the seed plan %s as it was: two windows in every header and in /v1/usage',
    async (plan, perMinute, perDay) => {
      const { auth } = await createKey(
        product,
        { name: 'metered key', ...{ plan, billingDay: 20 } },
        { overApi: true },
      );
      const res = await pets(auth).expect(200);
      const h = expectRateLimitHeaders(res);
      expect(h.policy).toBe(`"minute";q=${perMinute};w=60, "day";q=${perDay};w=86400`);
      expect(Object.keys(parseRateLimit(h.rateLimit))).toEqual(['minute', 'day']);
      expect([h.limit, h.remaining]).toEqual([perMinute, perMinute - 1]);
      // POST costs 4 here, on any plan.
      const posted = await request(product.gatewayUrl)
        .post('/v1/pets')
        .set('Authorization', auth)
        .send({ name: 'Rex', categoryId: 1 })
        .expect(201);
      expect(header(posted, 'x-ratelimit-remaining')).toBe(String(perMinute - 5));
      const usage = await request(product.gatewayUrl).get('/v1/usage').set('Authorization', auth).expect(200);
      expect(usage.body.windows.map((w: { name: string }) => w.name)).toEqual(['minute', 'day']);
    },
  );
});
