import request from 'supertest';
import { ManualClock } from '../../../src/shared/clock';
import { expectMatchesOpenApi } from '../../support/openapi';
import { uniqueNamespace } from '../../support/test-redis';
import {
  expectRateLimitHeaders,
  header,
  sequentially,
  startTestProduct,
  usageOf,
  watchInventory,
  type ProductHarness,
} from './gateway-kit';
import { expectError } from '../../support/errors';
import { createKey } from '../../support/keys';

/**
 * Limits a product team can roll out safely (CONTRACT §3, §4): shadow mode, the sliding minute,
 * Retry-After jitter and GET /v1/usage, through the real gateway, on Redis (injected clock: the
 * script takes `now` from it) and on the in-process store.
 */
const AT_58 = Date.UTC(2026, 4, 1, 12, 0, 58);

/** A plan under trial, and a free plan of 3/min so that tests stay short. */
const PLANS = {
  trial: { perMinute: 3, perDay: 1000, shadow: true },
  small: { perMinute: 3, perDay: 1000 },
};

async function metricValue(product: ProductHarness, name: string, labels: string): Promise<number> {
  const text = (await request(product.adminUrl).get('/metrics').expect(200)).text;
  const line = text
    .split('\n')
    .find((l) => l.startsWith(`${name}{`) && labels.split(',').every((label) => l.includes(label)));
  return line ? Number(line.split(' ').at(-1)) : 0;
}

for (const store of ['Redis', 'in-process store'] as const) {
  const withRedis = store === 'Redis';

  describe(`safe roll-out of limits through the gateway (${store})`, () => {
    const clock = new ManualClock(AT_58);
    let epoch = AT_58;
    let product: ProductHarness;
    /** Jitter draws, in order; the test sets them. */
    let draws: number[] = [];

    /** A fresh UTC day per test, 58 s into a minute; the clock only moves forward. */
    function startDay(): number {
      epoch += 86_400_000;
      clock.set(epoch);
      return epoch;
    }

    beforeAll(async () => {
      product = await startTestProduct({
        redis: withRedis,
        clock,
        random: () => draws.shift() ?? 0,
        overrides: { plans: PLANS, rateLimit: { retryAfterJitterSeconds: 5 }, anonymous: { perMinute: 1000 } },
      });
    });

    afterAll(async () => {
      await product?.close();
    });

    const get = (auth: string, path = '/v1/pets') => request(product.gatewayUrl).get(path).set('Authorization', auth);

    describe('shadow mode', () => {
      it('a shadowed plan over its limit is forwarded with its headers, logged and counted, never refused or banned', async () => {
        startDay();
        const { auth, id } = await createKey(product, { plan: 'trial' });
        const inventory = watchInventory(product);
        const responses = await sequentially(20, () => get(auth));
        // Past the threshold of 10 refusals a ban would start: it does not.
        expect(responses.map((r) => r.status)).toEqual(Array(20).fill(200));
        expect(inventory.count()).toBe(20);
        for (const res of responses) expect(header(res, 'retry-after')).toBeUndefined();
        expect(responses.map((r) => expectRateLimitHeaders(r).remaining)).toEqual([2, 1, 0, ...Array(17).fill(0)]);
        expect(
          await metricValue(product, 'gateway_ratelimit_shadow_denied_total', 'plan="trial",window="minute"'),
        ).toBe(17);
        expect(await metricValue(product, 'gateway_ratelimit_rejections_total', 'plan="trial"')).toBe(0);
        expect((await usageOf(product, id)).bannedUntil).toBeNull();
        const logged = product.logs.lines.filter((l) => l.includes('shadow limit would have refused'));
        expect(logged).toHaveLength(17);
        expect(JSON.parse(logged[0]!)).toMatchObject({ plan: 'trial', window: 'minute', keyId: id });
      });

      it('a key’s own limits shadow on an enforced plan, and enforce on a shadowed one (set through the admin API)', async () => {
        startDay();
        const bearer = `Bearer ${product.adminToken}`;
        const create = async (body: object) => {
          const res = await request(product.adminUrl)
            .post('/admin/keys')
            .set('Authorization', bearer)
            .send(body)
            .expect(201);
          return res.body as { id: string; key: string; limits: object };
        };
        const shadowedKey = await create({
          name: 'trial key',
          plan: 'small',
          limits: { perMinute: 2, perDay: 1000, shadow: true },
        });
        expect(shadowedKey.limits).toEqual({ perMinute: 2, perDay: 1000, shadow: true });
        const enforcedKey = await create({
          name: 'enforced key',
          plan: 'trial',
          limits: { perMinute: 2, perDay: 1000, shadow: false },
        });
        const statuses = async (key: string) =>
          (await sequentially(5, () => get(`Bearer ${key}`))).map((r) => r.status);
        expect(await statuses(shadowedKey.key)).toEqual([200, 200, 200, 200, 200]);
        expect(await statuses(enforcedKey.key)).toEqual([200, 200, 429, 429, 429]);
        const bad = await request(product.adminUrl)
          .post('/admin/keys')
          .set('Authorization', bearer)
          .send({ name: 'x', plan: 'small', limits: { perMinute: 2, perDay: 10, shadow: 'yes' } });
        expectError(bad, 400, 'validation_failed');
      });

      it('the same limits unshadowed refuse and ban', async () => {
        startDay();
        const { auth } = await createKey(product, { plan: 'small' });
        const responses = await sequentially(15, () => get(auth));
        expect(responses.map((r) => r.status)).toEqual([...Array(3).fill(200), ...Array(12).fill(429)]);
        expectError(responses[14]!, 429, 'temporarily_banned');
      });
    });

    describe('Retry-After jitter', () => {
      it('adds 0..N whole seconds to Retry-After, never less than the wait; X-RateLimit-Reset stays the truth', async () => {
        const start = startDay();
        const { auth } = await createKey(product, { plan: 'small' });
        await sequentially(3, () => get(auth).expect(200));
        // Fixed minute: the wait is 2 s (to 12:01:00); draws give 0, 2, 5 and 5 extra seconds.
        draws = [0, 0.4, 0.99, 0.9999];
        const refused = await sequentially(4, () => get(auth));
        for (const res of refused) {
          expectError(res, 429, 'rate_limited');
          expect(Number(header(res, 'x-ratelimit-reset'))).toBe(Math.ceil((start + 2_000) / 1000));
          expectMatchesOpenApi('GET', '/pets', res);
        }
        expect(refused.map((r) => Number(header(r, 'retry-after')))).toEqual([2, 4, 7, 7]);
      });
    });

    describe('GET /v1/usage', () => {
      it('shows the plan, both windows, ban and expiry, and consumes nothing', async () => {
        const start = startDay();
        const { auth, id } = await createKey(product, { plan: 'small' });
        await sequentially(2, () => get(auth).expect(200));
        const before = await usageOf(product, id);
        const answers = await sequentially(10, () => get(auth, '/v1/usage'));
        for (const res of answers) {
          expect(res.status).toBe(200);
          expect(res.body).toEqual({
            plan: 'small',
            windows: [
              { name: 'minute', limit: 3, remaining: 1, reset: Math.ceil((start + 2_000) / 1000) },
              { name: 'day', limit: 1000, remaining: 998, reset: (epoch - (epoch % 86_400_000) + 86_400_000) / 1000 },
            ],
            bannedUntil: null,
            expiresAt: null,
          });
          expect(expectRateLimitHeaders(res)).toMatchObject({ limit: 3, remaining: 1 });
          expectMatchesOpenApi('GET', '/usage', res);
        }
        expect(await usageOf(product, id)).toEqual(before);
        // The unit is still there to be used.
        expect(expectRateLimitHeaders(await get(auth).expect(200)).remaining).toBe(0);
      });

      it("shows the key's expiry", async () => {
        startDay();
        const expiresAt = new Date(clock.now() + 3_600_000).toISOString();
        const { key } = await product.keyService.create({ name: 'expiring', plan: 'small', expiresAt });
        const res = await get(`Bearer ${key}`, '/v1/usage').expect(200);
        expect((res.body as { expiresAt: string }).expiresAt).toBe(expiresAt);
        expectMatchesOpenApi('GET', '/usage', res);
      });

      it('shows a ban and is still answered while banned', async () => {
        startDay();
        const { auth } = await createKey(product, { plan: 'small' });
        await sequentially(15, () => get(auth));
        const res = await get(auth, '/v1/usage').expect(200);
        expect(Date.parse((res.body as { bannedUntil: string }).bannedUntil)).toBe(clock.now() + 900_000);
        expectMatchesOpenApi('GET', '/usage', res);
      });

      it('is a 401 without a valid key, and 405 for other methods, counting nothing', async () => {
        startDay();
        const missing = await request(product.gatewayUrl).get('/v1/usage');
        expectError(missing, 401, 'missing_api_key');
        expectError(await get('Bearer asg_dev_unknown', '/v1/usage'), 401, 'invalid_api_key');
        expectMatchesOpenApi('GET', '/usage', missing);
        const { auth, id } = await createKey(product, { plan: 'small' });
        const posted = await request(product.gatewayUrl).post('/v1/usage').set('Authorization', auth).send({});
        expectError(posted, 405, 'method_not_allowed');
        expect(header(posted, 'allow')).toBe('GET, HEAD');
        expect((await usageOf(product, id)).minute.remaining).toBe(3);
      });
    });
  });

  describe(`sliding minute beside fixed through the gateway (${store})`, () => {
    const products: Record<'fixed' | 'sliding', ProductHarness | null> = { fixed: null, sliding: null };
    const clock = new ManualClock(AT_58);

    beforeAll(async () => {
      for (const shape of ['fixed', 'sliding'] as const) {
        products[shape] = await startTestProduct({
          redis: withRedis,
          clock,
          overrides: { plans: PLANS, rateLimit: { minuteWindow: shape }, ban: { threshold: 1000 } },
        });
      }
    });

    afterAll(async () => {
      for (const product of Object.values(products)) await product?.close();
    });

    it('a burst at :58 and another at :02 admit twice the limit with fixed, the limit with sliding', async () => {
      const served: Record<string, number> = {};
      const retryAfter: Record<string, string | undefined> = {};
      for (const shape of ['fixed', 'sliding'] as const) {
        const product = products[shape]!;
        clock.set(AT_58);
        const { auth } = await createKey(product, { plan: 'free' });
        const send = () => request(product.gatewayUrl).get('/v1/pets').set('Authorization', auth);
        const first = await sequentially(70, send);
        clock.set(AT_58 + 4_000);
        const second = await sequentially(70, send);
        served[shape] = [...first, ...second].filter((r) => r.status === 200).length;
        retryAfter[shape] = header(second.at(-1)!, 'retry-after');
        clock.set(AT_58 + 60_000);
        served[`${shape} a minute after the first burst`] = (await send()).status;
      }
      // At 12:01:58 the fixed minute that admitted the second burst still runs; the sliding one has let the first go.
      expect(served).toEqual({
        fixed: 120,
        sliding: 60,
        'fixed a minute after the first burst': 429,
        'sliding a minute after the first burst': 200,
      });
      // At 12:01:02 the fixed window waits for 12:02:00; the sliding one for 12:01:58, when the :58 burst leaves.
      expect(retryAfter).toEqual({ fixed: '58', sliding: '56' });
    });
  });
}

describe('sliding minute on two gateway instances sharing one Redis', () => {
  const namespace = uniqueNamespace('sliding-pair');
  const clock = new ManualClock(AT_58);
  let a: ProductHarness;
  let b: ProductHarness;

  beforeAll(async () => {
    const overrides = { rateLimit: { minuteWindow: 'sliding' }, ban: { threshold: 100_000 } };
    a = await startTestProduct({ namespace, clock, overrides });
    b = await startTestProduct({ namespace, clock, overrides: { ...overrides, upstream: { url: a.inventory!.url } } });
  });

  afterAll(async () => {
    await b?.close();
    await a?.close();
  });

  it('200 concurrent requests at :58 and 200 more at :02, split over both: 60 admitted in all', async () => {
    const { auth } = await createKey(a, { plan: 'free' });
    const burst = () =>
      Promise.all(
        Array.from({ length: 200 }, async (_, i) => {
          const res = await fetch(`${i % 2 === 0 ? a.gatewayUrl : b.gatewayUrl}/v1/pets?limit=1`, {
            headers: { Authorization: auth },
          });
          await res.arrayBuffer();
          return { status: res.status, instance: i % 2 === 0 ? 'a' : 'b' };
        }),
      );
    const first = await burst();
    clock.set(AT_58 + 4_000);
    const second = await burst();
    const served = [...first, ...second].filter((r) => r.status === 200);
    expect(served).toHaveLength(60);
    expect(first.filter((r) => r.status === 200)).toHaveLength(60);
    expect(served.some((r) => r.instance === 'a') && served.some((r) => r.instance === 'b')).toBe(true);
    expect([...first, ...second].filter((r) => r.status !== 200).every((r) => r.status === 429)).toBe(true);
  });
});
