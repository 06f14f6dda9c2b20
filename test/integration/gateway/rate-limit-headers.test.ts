import request from 'supertest';
import { ManualClock } from '../../../src/shared/clock';
import { expectMatchesOpenApi } from '../../support/openapi';
import {
  MID_MINUTE,
  closedPortUrl,
  expectRateLimitHeaders,
  header,
  startTestProduct,
  type ProductHarness,
} from './gateway-kit';
import { expectError } from '../../support/errors';
import { createKey } from '../../support/keys';

// 12:30:15 UTC: the minute window ends in 45 s, the day window at midnight.
const MINUTE_END_S = Math.ceil(Date.UTC(2026, 2, 10, 12, 31) / 1000);
const DAY_END_S = Date.UTC(2026, 2, 11) / 1000;
const SECONDS_TO_DAY_END = DAY_END_S - MID_MINUTE / 1000;

/** CONTRACT §4: the same five headers and X-Request-Id on every /v1 response, errors included. */
describe('rate-limit headers on every /v1 response', () => {
  const clock = new ManualClock(MID_MINUTE);
  let product: ProductHarness;
  let unreachable: ProductHarness;

  beforeAll(async () => {
    product = await startTestProduct({ clock });
    unreachable = await startTestProduct({ clock, overrides: { upstream: { url: await closedPortUrl() } } });
  });

  afterAll(async () => {
    await product?.close();
    await unreachable?.close();
  });

  it('200: both windows of a free key, the minute binding', async () => {
    const { auth } = await createKey(product, { plan: 'free' });
    const res = await request(product.gatewayUrl).get('/v1/pets').set('Authorization', auth);

    expect(res.status).toBe(200);
    const headers = expectRateLimitHeaders(res);
    expect(headers).toMatchObject({ limit: 60, remaining: 59, reset: MINUTE_END_S });
    expect(headers.policy).toBe('"minute";q=60;w=60, "day";q=1000;w=86400');
    expect(headers.rateLimit).toBe(`"minute";r=59;t=45, "day";r=999;t=${SECONDS_TO_DAY_END}`);
    expectMatchesOpenApi('GET', '/pets', res);
  });

  it('201: a created pet carries the headers too', async () => {
    const { auth } = await createKey(product, { plan: 'pro' });
    const res = await request(product.gatewayUrl)
      .post('/v1/pets')
      .set('Authorization', auth)
      .send({ name: 'Rex', categoryId: 1 });

    expect(res.status).toBe(201);
    expect(expectRateLimitHeaders(res)).toMatchObject({ limit: 300, remaining: 299, reset: MINUTE_END_S });
    expectMatchesOpenApi('POST', '/pets', res);
  });

  it('400 from the inventory: headers added by the gateway, and the unit is consumed', async () => {
    const { auth } = await createKey(product, { plan: 'free' });
    const res = await request(product.gatewayUrl).get('/v1/pets?limit=0').set('Authorization', auth);

    expectError(res, 400, 'invalid_parameter');
    expect(expectRateLimitHeaders(res)).toMatchObject({ limit: 60, remaining: 59 });
    expectMatchesOpenApi('GET', '/pets', res);
  });

  it('401 without a key: the anonymous per-address window', async () => {
    const res = await request(product.gatewayUrl).get('/v1/pets');

    expectError(res, 401, 'missing_api_key');
    const headers = expectRateLimitHeaders(res);
    expect(headers.limit).toBe(30);
    expect(headers.policy).toBe('"anonymous";q=30;w=60');
    expect(headers.rateLimit).toMatch(/^"anonymous";r=\d+;t=\d+$/);
    expectMatchesOpenApi('GET', '/pets', res);
  });

  it('404 from the inventory and 404 from the gateway', async () => {
    const { auth } = await createKey(product, { plan: 'free' });
    const unknownPet = await request(product.gatewayUrl).get('/v1/pets/987654321').set('Authorization', auth);
    const unknownPath = await request(product.gatewayUrl).get('/v1/owners').set('Authorization', auth);

    expectError(unknownPet, 404, 'not_found');
    expect(expectRateLimitHeaders(unknownPet)).toMatchObject({ limit: 60, remaining: 59 });
    expectMatchesOpenApi('GET', '/pets/{petId}', unknownPet);
    expectError(unknownPath, 404, 'not_found');
    expect(expectRateLimitHeaders(unknownPath)).toMatchObject({ limit: 60, remaining: 58 });
  });

  it('429: the refusing window, Remaining 0 and Retry-After to its end', async () => {
    const { auth } = await createKey(product, { plan: 'free', limits: { perMinute: 2, perDay: 100 } });
    for (let i = 0; i < 2; i++)
      await request(product.gatewayUrl).get('/v1/pets').set('Authorization', auth).expect(200);
    const res = await request(product.gatewayUrl).get('/v1/pets').set('Authorization', auth);

    expectError(res, 429, 'rate_limited');
    const headers = expectRateLimitHeaders(res);
    expect(headers).toMatchObject({ limit: 2, remaining: 0, reset: MINUTE_END_S });
    expect(headers.policy).toBe('"minute";q=2;w=60, "day";q=100;w=86400');
    expect(headers.rateLimit).toBe(`"minute";r=0;t=45, "day";r=98;t=${SECONDS_TO_DAY_END}`);
    expect(header(res, 'retry-after')).toBe('45');
    expectMatchesOpenApi('GET', '/pets', res);
  });

  it('502 when the inventory cannot be reached', async () => {
    const { auth } = await createKey(unreachable, { plan: 'free' });
    const res = await request(unreachable.gatewayUrl).get('/v1/pets').set('Authorization', auth);

    expectError(res, 502, 'upstream_unavailable');
    expect(expectRateLimitHeaders(res)).toMatchObject({ limit: 60, remaining: 59, reset: MINUTE_END_S });
    expectMatchesOpenApi('GET', '/pets', res);
  });
});
