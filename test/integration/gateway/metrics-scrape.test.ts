import request from 'supertest';
import { ManualClock } from '../../../src/shared/clock';
import { MID_MINUTE, sequentially, startTestProduct, type ProductHarness } from './gateway-kit';
import { createKey } from '../../support/keys';

/**
 * Issue 5: scripted traffic, then one scrape of the admin /metrics, and every counter asserted to
 * its exact value by status, plan and window. The clock stands still in the middle of a minute, so
 * no window rolls over under the script.
 */

/** Value of one sample, e.g. sample(text, 'gateway_key_bans_total{plan="business"}'); 0 when absent. */
function sample(text: string, series: string): number {
  const line = text.split('\n').find((l) => l.startsWith(series + ' '));
  return line === undefined ? 0 : Number(line.slice(series.length + 1));
}

describe('GET /metrics after scripted traffic', () => {
  let product: ProductHarness;
  let metrics: string;
  let deprecatedCaller: { id: string };
  let revokedId: string;
  const clock = new ManualClock(MID_MINUTE);

  beforeAll(async () => {
    product = await startTestProduct({
      clock,
      overrides: { ban: { threshold: 2, windowSeconds: 60, durationSeconds: 600 } },
    });
    const gateway = () => request(product.gatewayUrl);

    // free, 5 a minute: 5 admitted (the 4th crosses 80 %), the 6th refused by the minute.
    const free = await createKey(product, { plan: 'free', limits: { perMinute: 5, perDay: 100 } });
    await sequentially(6, () => gateway().get('/v1/pets').set('Authorization', free.auth));

    // pro, 5 a day: 5 admitted (the 4th crosses 80 % of the day), the 6th refused by the day.
    const pro = await createKey(product, { plan: 'pro', limits: { perMinute: 100, perDay: 5 } });
    await gateway().post('/v1/pets').set('Authorization', pro.auth).send({ name: 'Rex', categoryId: 1 }).expect(201);
    await sequentially(5, () => gateway().get('/v1/pets').set('Authorization', pro.auth));

    // business, 1 a minute, ban after 2 refusals: 200, 429, 429, 429 (bans), then 429 banned.
    const business = await createKey(product, { plan: 'business', limits: { perMinute: 1, perDay: 100 } });
    await sequentially(5, () => gateway().get('/v1/pets').set('Authorization', business.auth));

    // The deprecated operation, by GET and HEAD.
    const enterprise = await createKey(product, {
      plan: 'enterprise',
      name: 'legacy client',
      limits: { perMinute: 100, perDay: 1000 },
    });
    deprecatedCaller = enterprise;
    await gateway().get('/v1/pets/1').set('Authorization', enterprise.auth).expect(200);
    await gateway().get('/v1/pets/999').set('Authorization', enterprise.auth).expect(404);
    await gateway().head('/v1/pets/1').set('Authorization', enterprise.auth).expect(200);

    // Auth failures: missing, invalid, revoked.
    const revoked = await createKey(product, { plan: 'free' });
    revokedId = revoked.id;
    await product.keyService.revoke(revoked.id);
    await gateway().get('/v1/pets').expect(401);
    await gateway()
      .get('/v1/pets')
      .set('Authorization', 'Bearer asg_dev_' + 'Z'.repeat(32))
      .expect(401);
    await gateway().get('/v1/pets').set('Authorization', revoked.auth).expect(401);

    metrics = (await request(product.adminUrl).get('/metrics').expect(200)).text;
  });

  afterAll(async () => {
    await product?.close();
  });

  it('counts requests by method, route template, status and plan', () => {
    const counted = (method: string, route: string, status: number, plan: string) =>
      sample(
        metrics,
        `gateway_http_requests_total{method="${method}",route="${route}",status_code="${status}",plan="${plan}"}`,
      );
    expect(counted('GET', '/v1/pets', 200, 'free')).toBe(5);
    expect(counted('GET', '/v1/pets', 429, 'free')).toBe(1);
    expect(counted('POST', '/v1/pets', 201, 'pro')).toBe(1);
    expect(counted('GET', '/v1/pets', 200, 'pro')).toBe(4);
    expect(counted('GET', '/v1/pets', 429, 'pro')).toBe(1);
    expect(counted('GET', '/v1/pets', 200, 'business')).toBe(1);
    expect(counted('GET', '/v1/pets', 429, 'business')).toBe(4);
    expect(counted('GET', '/v1/pets/{petId}', 200, 'enterprise')).toBe(1);
    expect(counted('GET', '/v1/pets/{petId}', 404, 'enterprise')).toBe(1);
    expect(counted('HEAD', '/v1/pets/{petId}', 200, 'enterprise')).toBe(1);
    // Refused keys count as anonymous: their plan is not known to be theirs.
    expect(counted('GET', '/v1/pets', 401, 'anonymous')).toBe(3);
  });

  it('times requests and upstream calls with the same route labels, without plan', () => {
    expect(
      sample(metrics, 'gateway_http_request_duration_seconds_count{method="GET",route="/v1/pets",status_code="200"}'),
    ).toBe(10);
    expect(
      sample(metrics, 'gateway_http_request_duration_seconds_count{method="GET",route="/v1/pets",status_code="429"}'),
    ).toBe(6);
    // Only forwarded requests reach the upstream histogram.
    expect(
      sample(
        metrics,
        'gateway_upstream_request_duration_seconds_count{method="GET",route="/v1/pets",status_code="200"}',
      ),
    ).toBe(10);
    expect(
      sample(
        metrics,
        'gateway_upstream_request_duration_seconds_count{method="GET",route="/v1/pets",status_code="429"}',
      ),
    ).toBe(0);
    expect(
      sample(
        metrics,
        'gateway_upstream_request_duration_seconds_count{method="POST",route="/v1/pets",status_code="201"}',
      ),
    ).toBe(1);
    expect(metrics).toMatch(
      /^gateway_http_request_duration_seconds_bucket\{le="0\.0005",method="GET",route="\/v1\/pets",status_code="200"\} \d+$/m,
    );
  });

  it('counts refusals by plan and window, and the bans they caused', () => {
    expect(sample(metrics, 'gateway_ratelimit_rejections_total{plan="free",window="minute"}')).toBe(1);
    expect(sample(metrics, 'gateway_ratelimit_rejections_total{plan="pro",window="day"}')).toBe(1);
    expect(sample(metrics, 'gateway_ratelimit_rejections_total{plan="business",window="minute"}')).toBe(3);
    expect(sample(metrics, 'gateway_ratelimit_rejections_total{plan="business",window="ban"}')).toBe(1);
    expect(sample(metrics, 'gateway_key_bans_total{plan="business"}')).toBe(1);
    expect(sample(metrics, 'gateway_active_bans')).toBe(1);
  });

  it('counts each key crossing 80 % of a window once', () => {
    expect(sample(metrics, 'gateway_ratelimit_near_limit_total{plan="free",window="minute"}')).toBe(1);
    expect(sample(metrics, 'gateway_ratelimit_near_limit_total{plan="pro",window="day"}')).toBe(1);
    // 1 of 1 is past 80 % too.
    expect(sample(metrics, 'gateway_ratelimit_near_limit_total{plan="business",window="minute"}')).toBe(1);
    expect(sample(metrics, 'gateway_ratelimit_near_limit_total{plan="free",window="day"}')).toBe(0);
  });

  it('counts auth failures by reason and deprecated calls by route and plan', () => {
    expect(sample(metrics, 'gateway_auth_failures_total{reason="missing"}')).toBe(1);
    expect(sample(metrics, 'gateway_auth_failures_total{reason="invalid"}')).toBe(1);
    expect(sample(metrics, 'gateway_auth_failures_total{reason="revoked"}')).toBe(1);
    expect(sample(metrics, 'gateway_deprecated_requests_total{route="/v1/pets/{petId}",plan="enterprise"}')).toBe(3);
  });

  it('shows a healthy store: no errors, not degraded, nothing unenforced', () => {
    expect(sample(metrics, 'gateway_store_errors_total')).toBe(0);
    expect(sample(metrics, 'gateway_store_degraded')).toBe(0);
    expect(metrics).not.toMatch(/^gateway_ratelimit_unenforced_total\{/m);
    expect(sample(metrics, 'gateway_upstream_errors_total{reason="refused"}')).toBe(0);
  });

  it('serves the default process metrics', () => {
    expect(metrics).toMatch(/^process_cpu_seconds_total \d/m);
    expect(metrics).toMatch(/^nodejs_eventloop_lag_seconds \d/m);
    expect(metrics).toMatch(/^process_resident_memory_bytes \d/m);
  });

  it('never puts a key id or a raw path in a label', () => {
    for (const id of [deprecatedCaller.id, revokedId]) expect(metrics).not.toContain(id);
    expect(metrics).not.toMatch(/route="\/v1\/pets\/(1|999)"/);
  });

  it('GET /admin/deprecations names the key that called the deprecated operation, with its count and last call', async () => {
    const res = await request(product.adminUrl)
      .get('/admin/deprecations')
      .set('Authorization', `Bearer ${product.adminToken}`)
      .expect(200);
    expect(res.body).toEqual({
      lookbackDays: 30,
      routes: [
        {
          method: 'GET',
          route: '/v1/pets/{petId}',
          deprecatedAt: '2025-12-05T00:00:00.000Z',
          sunset: '2030-12-05T00:00:00.000Z',
          callers: [
            {
              keyId: deprecatedCaller.id,
              name: 'legacy client',
              plan: 'enterprise',
              count: 3,
              lastCallAt: new Date(MID_MINUTE).toISOString(),
            },
          ],
        },
      ],
    });
  });

  it('GET /admin/deprecations needs the admin token', async () => {
    const res = await request(product.adminUrl).get('/admin/deprecations').expect(401);
    expect(res.body).toMatchObject({ code: 'missing_api_key', status: 401 });
  });
});
