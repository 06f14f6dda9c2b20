import request from 'supertest';
import { uniqueNamespace } from '../../support/test-redis';
import { admin, expectRateLimitHeaders, header, startTestProduct, usageOf, type ProductHarness } from './gateway-kit';
import { eventually } from '../../support/eventually';
import { expectError } from '../../support/errors';
import { createKey } from '../../support/keys';
import { awayFromMinuteEnd } from '../../support/minute-end';

/**
 * Two gateway instances on one Redis namespace, on the real clock (Redis TIME decides windows):
 * instance A runs the inventory, instance B forwards to it. Keys are made through A's admin API.
 */
describe('two gateway instances on one Redis', () => {
  const namespace = uniqueNamespace('pair');
  let a: ProductHarness;
  let b: ProductHarness;

  beforeAll(async () => {
    // Polling a revoked key goes through the anonymous limit; keep it out of the way.
    const overrides = { anonymous: { perMinute: 1000 } };
    a = await startTestProduct({ namespace, overrides });
    b = await startTestProduct({ namespace, overrides: { ...overrides, upstream: { url: a.inventory!.url } } });
  });

  afterAll(async () => {
    await b?.close();
    await a?.close();
  });

  it('200 concurrent requests split over both instances admit exactly the limit', async () => {
    const { id, auth } = await createKey(
      a,
      { name: 'burst', plan: 'free', limits: { perMinute: 60, perDay: 1000 } },
      { overApi: true },
    );
    await awayFromMinuteEnd(5_000);
    const responses = await Promise.all(
      Array.from({ length: 200 }, async (_, i) => {
        const res = await fetch(`${i % 2 === 0 ? a.gatewayUrl : b.gatewayUrl}/v1/pets?limit=1`, {
          headers: { Authorization: auth },
        });
        const body = (await res.json()) as { code?: string };
        return { status: res.status, code: body.code, instance: i % 2 === 0 ? 'a' : 'b' };
      }),
    );

    const served = responses.filter((r) => r.status === 200);
    const refused = responses.filter((r) => r.status === 429);
    expect(served).toHaveLength(60);
    expect(refused).toHaveLength(140);
    // Refusals are decided one at a time in Redis too: the first threshold + 1 (10 + 1) are
    // rate_limited, the last of those bans the key, and the rest find it banned.
    expect(refused.filter((r) => r.code === 'rate_limited')).toHaveLength(11);
    expect(refused.filter((r) => r.code === 'temporarily_banned')).toHaveLength(129);
    // Both instances admitted some: the count really was shared.
    expect(served.some((r) => r.instance === 'a') && served.some((r) => r.instance === 'b')).toBe(true);

    const usage = await usageOf(b, id);
    expect(usage.minute.remaining).toBe(0);
    expect(usage.day.remaining).toBe(940);
  });

  it('a revocation on instance A is seen by instance B within 1 s: 401 revoked_api_key', async () => {
    const { id, auth } = await createKey(a, { name: 'to revoke', plan: 'free' }, { overApi: true });
    // B resolves the key twice, so it is in B's cache when A revokes it.
    for (let i = 0; i < 2; i++) await request(b.gatewayUrl).get('/v1/pets').set('Authorization', auth).expect(200);

    await request(a.adminUrl).delete(`/admin/keys/${id}`).set('Authorization', `Bearer ${a.adminToken}`).expect(204);
    let last: request.Response | undefined;
    const took = await eventually(
      async () => {
        last = await request(b.gatewayUrl).get('/v1/pets').set('Authorization', auth);
        return last.status !== 200;
      },
      { timeoutMs: 1000 },
    );
    expect(took).toBeLessThan(1000);
    expectError(last!, 401, 'revoked_api_key');
    expectRateLimitHeaders(last!);
    expectError(await request(a.gatewayUrl).get('/v1/pets').set('Authorization', auth), 401, 'revoked_api_key');
  });

  it('a plan change on instance A is seen by instance B within 1 s: X-RateLimit-Limit changes', async () => {
    const { id, auth } = await createKey(a, { name: 'upgrading', plan: 'pro' }, { overApi: true });
    for (let i = 0; i < 2; i++) {
      const res = await request(b.gatewayUrl).get('/v1/pets').set('Authorization', auth).expect(200);
      expect(header(res, 'x-ratelimit-limit')).toBe('300');
    }

    const patched = await admin(a).patch(`/admin/keys/${id}`, { plan: 'business' }).expect(200);
    expect((patched.body as { plan: string; limits: unknown }).limits).toEqual({ perMinute: 1000, perDay: 100000 });
    let last: request.Response | undefined;
    const took = await eventually(
      async () => {
        last = await request(b.gatewayUrl).get('/v1/pets').set('Authorization', auth);
        return header(last, 'x-ratelimit-limit') !== '300';
      },
      { timeoutMs: 1000 },
    );
    expect(took).toBeLessThan(1000);
    expect(last!.status).toBe(200);
    expect(header(last!, 'x-ratelimit-limit')).toBe('1000');
    expect(header(last!, 'ratelimit-policy')).toBe('"minute";q=1000;w=60, "day";q=100000;w=86400');
  });

  it('a limits override on instance A is seen by instance B within 1 s', async () => {
    const { id, auth } = await createKey(a, { name: 'tightened', plan: 'free' }, { overApi: true });
    await request(b.gatewayUrl).get('/v1/pets').set('Authorization', auth).expect(200);

    await admin(a)
      .patch(`/admin/keys/${id}`, { limits: { perMinute: 2, perDay: 50 } })
      .expect(200);
    let last: request.Response | undefined;
    await eventually(
      async () => {
        last = await request(b.gatewayUrl).get('/v1/pets').set('Authorization', auth);
        return header(last, 'x-ratelimit-limit') !== '60';
      },
      { timeoutMs: 1000 },
    );
    expect(header(last!, 'ratelimit-policy')).toBe('"minute";q=2;w=60, "day";q=50;w=86400');
  });
});
