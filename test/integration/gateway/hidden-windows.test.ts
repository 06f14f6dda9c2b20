import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import request from 'supertest';
import { ManualClock } from '../../../src/shared/clock';
import { expectMatchesOpenApi } from '../../support/openapi';
import { expectError, expectRefusedBy } from '../../support/errors';
import { eventually } from '../../support/eventually';
import { header, RATE_LIMIT_HEADERS, startTestProduct, type ProductHarness } from './gateway-kit';
import { scrape } from './listener-kit';

/**
 * Which window refused, and hidden windows (CONTRACT §3, §4; issue 54 items 2 and 3), end to end
 * on Redis and on the in-process store: every 429 rate_limited names its window; a window a plan,
 * a key or a consumer hides is enforced, named and counted in no header, and its 429 says
 * `"window": "hidden"` with the true Retry-After.
 */

/** 15 March 2026, 12:00:15 UTC: 45 s to the minute's end, 11 h 59 min 45 s to the day's. */
const NOW = Date.UTC(2026, 2, 15, 12, 0, 15);
const TO_MINUTE_END = 45;
const TO_DAY_END = (Date.UTC(2026, 2, 16) - NOW) / 1000;

const overrides = {
  plans: {
    guarded: { perMinute: 2, perDay: 1000, hiddenWindows: ['minute'] },
    stealth: { perMinute: 2, perDay: 1000, perMonth: 5000, hiddenWindows: ['month', 'minute', 'day'] },
  },
  anonymous: { perMinute: 2 },
};

describe.each([
  ['on Redis', true],
  ['in process', false],
])('the refusing window and hidden windows %s', (_label, redis) => {
  let product: ProductHarness;
  const clock = new ManualClock(NOW);

  beforeAll(async () => {
    product = await startTestProduct({ clock, redis, overrides });
  });
  afterAll(async () => {
    await product?.close();
  });
  beforeEach(() => clock.set(NOW));

  const admin = (target: ProductHarness, method: 'get' | 'post' | 'patch', route: string) =>
    request(target.adminUrl)[method](route).set('Authorization', `Bearer ${target.adminToken}`);
  const pets = (key: string) =>
    request(product.gatewayUrl).get('/v1/pets?limit=1').set('Authorization', `Bearer ${key}`);
  const usage = (key: string) => request(product.gatewayUrl).get('/v1/usage').set('Authorization', `Bearer ${key}`);

  async function newKey(body: Record<string, unknown>): Promise<{ id: string; key: string }> {
    const res = await admin(product, 'post', '/admin/keys').send({ name: 'k', plan: 'pro', ...body });
    expect(res.status).toBe(201);
    return res.body as { id: string; key: string };
  }

  /** A key of a new consumer with these limits, once this instance's consumer directory knows it. */
  async function consumerKey(limits: Record<string, unknown>): Promise<{ consumerId: string; key: string }> {
    const consumer = await admin(product, 'post', '/admin/consumers').send({ name: 'Acme', limits });
    expect(consumer.status).toBe(201);
    const { key } = await newKey({ consumerId: consumer.body.id });
    await eventually(async () => (await usage(key)).body.consumer?.id === consumer.body.id, { timeoutMs: 1000 });
    return { consumerId: consumer.body.id as string, key };
  }

  /** Sends until the first refusal (at most `max`): the 429. */
  async function firstRefusal(key: string, max: number): Promise<request.Response> {
    for (let i = 0; i < max; i++) {
      const res = await pets(key);
      if (res.status === 429) return res;
      expect(res.status).toBe(200);
    }
    throw new Error(`no 429 in ${max} requests`);
  }

  /** Every rate-limit header value of an answer, joined: a hidden window's name must appear in none. */
  const rateLimitText = (res: request.Response) =>
    RATE_LIMIT_HEADERS.map((name) => header(res, name) ?? '').join(' | ');

  it('every kind of 429 rate_limited names the window that refused it, as the headers name it', async () => {
    const cases: Array<[string, () => Promise<string>]> = [
      ['minute', async () => (await newKey({ limits: { perMinute: 1, perDay: 100 } })).key],
      ['day', async () => (await newKey({ limits: { perMinute: 100, perDay: 1 } })).key],
      ['month', async () => (await newKey({ limits: { perMinute: 100, perDay: 100, perMonth: 1 } })).key],
      ['consumer-minute', async () => (await consumerKey({ perMinute: 1 })).key],
      ['consumer-day', async () => (await consumerKey({ perDay: 1 })).key],
      ['consumer-month', async () => (await consumerKey({ perMonth: 1 })).key],
    ];
    for (const [window, make] of cases) {
      const refused = await firstRefusal(await make(), 3);
      expectRefusedBy(refused, window as never);
      expect(rateLimitText(refused)).toContain(`"${window}"`);
      expectMatchesOpenApi('GET', '/pets', refused);
    }
    // Requests without a key: the per-address window.
    const anonymous = [];
    for (let i = 0; i < 3; i++) anonymous.push(await request(product.gatewayUrl).get('/v1/pets'));
    expect(anonymous.map((r) => r.status)).toEqual([401, 401, 429]);
    expectRefusedBy(anonymous[2]!, 'anonymous');
    expectMatchesOpenApi('GET', '/pets', anonymous[2]!);
  });

  it('a plan hiding its minute enforces it, shows only the day in every header and /v1/usage, and its 429 says hidden with the minute’s wait', async () => {
    const { key } = await newKey({ plan: 'guarded' });
    for (const remaining of [999, 998]) {
      const served = await pets(key).expect(200);
      expect([
        header(served, 'x-ratelimit-limit'),
        header(served, 'x-ratelimit-remaining'),
        header(served, 'x-ratelimit-reset'),
      ]).toEqual(['1000', String(remaining), String(Date.UTC(2026, 2, 16) / 1000)]);
      expect(header(served, 'ratelimit-policy')).toBe('"day";q=1000;w=86400');
      expect(header(served, 'ratelimit')).toBe(`"day";r=${remaining};t=${TO_DAY_END}`);
    }
    const refused = await pets(key);
    expectRefusedBy(refused, 'hidden');
    expect(refused.body.message).not.toMatch(/minute/);
    expect(header(refused, 'retry-after')).toBe(String(TO_MINUTE_END));
    expect(header(refused, 'ratelimit-policy')).toBe('"day";q=1000;w=86400');
    expect(rateLimitText(refused)).not.toContain('minute');
    expectMatchesOpenApi('GET', '/pets', refused);

    const shown = await usage(key).expect(200);
    expect(shown.body.windows).toEqual([
      { name: 'day', limit: 1000, remaining: 998, reset: Date.UTC(2026, 2, 16) / 1000 },
    ]);
    expect(rateLimitText(shown)).not.toContain('minute');
    expectMatchesOpenApi('GET', '/usage', shown);
    // The operator's request log line and metric keep the true window.
    const logged = () =>
      product.logs.lines.find(
        (line) => line.includes(`"requestId":"${header(refused, 'x-request-id')!}"`) && line.includes('"status":429'),
      );
    await eventually(() => logged() !== undefined, { timeoutMs: 2000, what: 'the refused request’s log line' });
    expect(JSON.parse(logged()!)).toMatchObject({ status: 429, rateLimit: 'limited', window: 'minute' });
    expect(
      (await scrape(product, 'gateway_ratelimit_rejections_total')).find((s) => s.labels.plan === 'guarded')?.labels
        .window,
    ).toBe('minute');

    // Enforced to the second: refused one second before the minute ends, served at it.
    clock.set(NOW + (TO_MINUTE_END - 1) * 1000);
    expectRefusedBy(await pets(key), 'hidden');
    clock.set(NOW + TO_MINUTE_END * 1000);
    expect(header(await pets(key).expect(200), 'x-ratelimit-remaining')).toBe('997');
  });

  it("a key's own hiddenWindows wins over its plan's: it may hide its day, or show a plan's hidden minute with []", async () => {
    const hidingDay = await newKey({ limits: { perMinute: 100, perDay: 2, hiddenWindows: ['day'] } });
    const refused = await firstRefusal(hidingDay.key, 3);
    expectRefusedBy(refused, 'hidden');
    expect(header(refused, 'retry-after')).toBe(String(TO_DAY_END));
    expect(header(refused, 'ratelimit-policy')).toBe('"minute";q=100;w=60');
    expect(header(refused, 'x-ratelimit-limit')).toBe('100');

    const showing = await newKey({ plan: 'guarded', limits: { perMinute: 2, perDay: 1000, hiddenWindows: [] } });
    const minute = await firstRefusal(showing.key, 3);
    expectRefusedBy(minute, 'minute');
    expect(header(minute, 'ratelimit-policy')).toBe('"minute";q=2;w=60, "day";q=1000;w=86400');
  });

  it("a consumer's hiddenWindows hides its consumer windows only; its 429 says hidden", async () => {
    const { key } = await consumerKey({ perMinute: 1, perDay: 500, hiddenWindows: ['minute'] });
    const served = await pets(key).expect(200);
    expect(header(served, 'ratelimit-policy')).toBe(
      '"minute";q=300;w=60, "day";q=10000;w=86400, "consumer-day";q=500;w=86400',
    );
    const refused = await pets(key);
    expectRefusedBy(refused, 'hidden');
    expect(header(refused, 'retry-after')).toBe(String(TO_MINUTE_END));
    expect(rateLimitText(refused)).not.toContain('consumer-minute');
    expect((await usage(key).expect(200)).body.windows.map((w: { name: string }) => w.name)).toEqual([
      'minute',
      'day',
      'consumer-day',
    ]);
  });

  it('every window hidden: no rate-limit header at all, an empty usage list, and the 429 still has Retry-After', async () => {
    const { key } = await newKey({ plan: 'stealth' });
    const served = await pets(key).expect(200);
    for (const name of RATE_LIMIT_HEADERS)
      expect({ name, value: header(served, name) }).toEqual({ name, value: undefined });
    await pets(key).expect(200);
    const refused = await pets(key);
    expectRefusedBy(refused, 'hidden');
    expect(header(refused, 'retry-after')).toBe(String(TO_MINUTE_END));
    expect(rateLimitText(refused)).toBe(' |  |  |  | ');
    expect((await usage(key).expect(200)).body.windows).toEqual([]);
  });

  it('the admin API refuses a window name it does not know with 400, for keys and consumers', async () => {
    const { id } = await newKey({});
    const consumer = await admin(product, 'post', '/admin/consumers').send({ name: 'c' }).expect(201);
    for (const hiddenWindows of [['hour'], ['consumer-minute'], 'minute', [1]]) {
      expectError(
        await admin(product, 'post', '/admin/keys').send({
          name: 'k',
          plan: 'pro',
          limits: { perMinute: 1, perDay: 1, hiddenWindows },
        }),
        400,
        'validation_failed',
      );
      expectError(
        await admin(product, 'patch', `/admin/keys/${id}`).send({ limits: { perMinute: 1, perDay: 1, hiddenWindows } }),
        400,
        'validation_failed',
      );
      expectError(
        await admin(product, 'post', '/admin/consumers').send({ name: 'c', limits: { perMinute: 1, hiddenWindows } }),
        400,
        'validation_failed',
      );
      expectError(
        await admin(product, 'patch', `/admin/consumers/${consumer.body.id as string}`).send({
          limits: { perMinute: 1, hiddenWindows },
        }),
        400,
        'validation_failed',
      );
    }
    // A list is kept in canonical order, without repeats.
    const patched = await admin(product, 'patch', `/admin/keys/${id}`)
      .send({ limits: { perMinute: 1, perDay: 1, hiddenWindows: ['day', 'minute', 'day'] } })
      .expect(200);
    expect(patched.body.limits.hiddenWindows).toEqual(['minute', 'day']);
  });

  it('an export carries hiddenWindows of keys and consumers, and imports into a fresh gateway (and survives its restart)', async () => {
    const { id } = await newKey({ limits: { perMinute: 7, perDay: 70, hiddenWindows: ['minute'] } });
    const cleared = await newKey({ limits: { perMinute: 7, perDay: 70, hiddenWindows: [] } });
    const { consumerId } = await consumerKey({ perDay: 50, hiddenWindows: ['day'] });
    const backup = (await admin(product, 'get', '/admin/keys/export').expect(200)).text;

    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'asg-hidden-'));
    let target = await startTestProduct({ redis, overrides, dataDir });
    try {
      await admin(target, 'post', '/admin/keys/import')
        .set('Content-Type', 'application/x-ndjson')
        .send(backup)
        .expect(200);
      const check = async (t: ProductHarness) => {
        expect((await admin(t, 'get', `/admin/keys/${id}`).expect(200)).body.limits.hiddenWindows).toEqual(['minute']);
        expect((await admin(t, 'get', `/admin/keys/${cleared.id}`).expect(200)).body.limits.hiddenWindows).toEqual([]);
        expect((await admin(t, 'get', `/admin/consumers/${consumerId}`).expect(200)).body.limits.hiddenWindows).toEqual(
          ['day'],
        );
      };
      await check(target);
      if (!redis) {
        // The in-process store's SQLite file holds them: a restart on the same data dir keeps them.
        await target.close();
        target = await startTestProduct({ redis, overrides, dataDir });
        await check(target);
      }
    } finally {
      await target.close();
    }
  });
});
