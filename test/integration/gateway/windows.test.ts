import request from 'supertest';
import { ManualClock } from '../../../src/shared/clock';
import { expectMatchesOpenApi } from '../../support/openapi';
import {
  expectRateLimitHeaders,
  header,
  parseRateLimit,
  sequentially,
  startTestProduct,
  usageOf,
  type ProductHarness,
} from './gateway-kit';
import { expectError } from '../../support/errors';
import { createKey } from '../../support/keys';

/**
 * Per-key windows end to end (CONTRACT §4), on real Redis with an injected clock: the script takes
 * `now` from it instead of Redis TIME, so windows roll over when the test says so.
 */
describe('per-key windows through the gateway', () => {
  const clock = new ManualClock();
  let product: ProductHarness;
  let epoch = Date.UTC(2026, 3, 1);

  /** Each test starts on a fresh UTC day, 15 s into a minute; the clock only moves forward. */
  function startDay(hours = 12, minutes = 30): number {
    epoch += 86_400_000;
    const start = epoch + hours * 3_600_000 + minutes * 60_000 + 15_000;
    clock.set(start);
    return start;
  }

  const get = (auth: string) => request(product.gatewayUrl).get('/v1/pets').set('Authorization', auth);

  beforeAll(async () => {
    product = await startTestProduct({ clock });
  });

  afterAll(async () => {
    await product?.close();
  });

  it('the 61st request of a free key in one minute is 429 rate_limited', async () => {
    const start = startDay();
    const { auth } = await createKey(product, { plan: 'free' });
    const served = await sequentially(60, () => get(auth));
    expect(served.map((r) => r.status)).toEqual(Array(60).fill(200));
    expect(served.map((r) => Number(header(r, 'x-ratelimit-remaining')))).toEqual(
      Array.from({ length: 60 }, (_, i) => 59 - i),
    );

    const refused = await get(auth);
    expectError(refused, 429, 'rate_limited');
    const headers = expectRateLimitHeaders(refused);
    expect(headers).toMatchObject({ limit: 60, remaining: 0 });
    const retryAfter = Number(header(refused, 'retry-after'));
    expect(Number.isInteger(retryAfter)).toBe(true);
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBe(45);
    expect(headers.reset).toBe(Math.ceil((start + 45_000) / 1000));
    expectMatchesOpenApi('GET', '/pets', refused);
  });

  it('Retry-After is honest: refused one second before it, served at it, and X-RateLimit-Reset has passed', async () => {
    startDay();
    const { auth } = await createKey(product, { plan: 'free', limits: { perMinute: 3, perDay: 1000 } });
    await sequentially(3, () => get(auth).expect(200));
    const refused = await get(auth).expect(429);
    const retryAfter = Number(header(refused, 'retry-after'));
    const reset = Number(header(refused, 'x-ratelimit-reset'));
    const refusedAt = clock.now();

    clock.set(refusedAt + (retryAfter - 1) * 1000);
    expectError(await get(auth), 429, 'rate_limited');

    clock.set(refusedAt + retryAfter * 1000);
    expect(clock.now() / 1000).toBeGreaterThanOrEqual(reset);
    const served = await get(auth);
    expect(served.status).toBe(200);
    expect(expectRateLimitHeaders(served)).toMatchObject({ limit: 3, remaining: 2 });
  });

  it('the day window: the 6th request of a 5-a-day key is refused until UTC midnight', async () => {
    const start = startDay(18, 0); // 18:00:15 UTC
    const midnight = Math.ceil(start / 86_400_000) * 86_400_000;
    const { auth } = await createKey(product, { plan: 'enterprise', limits: { perMinute: 100, perDay: 5 } });
    const served = await sequentially(5, () => get(auth));
    // The day has fewer left than the minute, so X-RateLimit-* show the day.
    expect(served.map((r) => [r.status, header(r, 'x-ratelimit-limit'), header(r, 'x-ratelimit-remaining')])).toEqual(
      [4, 3, 2, 1, 0].map((left) => [200, '5', String(left)]),
    );

    const refused = await get(auth);
    expectError(refused, 429, 'rate_limited');
    expect(expectRateLimitHeaders(refused)).toMatchObject({ limit: 5, remaining: 0, reset: midnight / 1000 });
    expect(Number(header(refused, 'retry-after'))).toBe((midnight - start) / 1000);

    // A new minute does not help: the day still binds.
    clock.advance(5 * 60_000);
    const stillRefused = await get(auth);
    expectError(stillRefused, 429, 'rate_limited');
    expect(Number(header(stillRefused, 'retry-after'))).toBe((midnight - clock.now()) / 1000);

    clock.set(midnight);
    const nextDay = await get(auth);
    expect(nextDay.status).toBe(200);
    expect(expectRateLimitHeaders(nextDay)).toMatchObject({ limit: 5, remaining: 4 });
  });

  it('when both windows are used up, Retry-After and X-RateLimit-Reset name the later one (midnight)', async () => {
    const start = startDay(20, 0);
    const midnight = Math.ceil(start / 86_400_000) * 86_400_000;
    const { auth } = await createKey(product, { plan: 'enterprise', limits: { perMinute: 2, perDay: 2 } });
    await sequentially(2, () => get(auth).expect(200));

    const refused = await get(auth);
    expectError(refused, 429, 'rate_limited');
    expect(Number(header(refused, 'retry-after'))).toBe((midnight - start) / 1000);
    expect(expectRateLimitHeaders(refused)).toMatchObject({ limit: 2, remaining: 0, reset: midnight / 1000 });

    // The minute ending changes nothing: the honest answer was midnight.
    clock.advance(60_000);
    expectError(await get(auth), 429, 'rate_limited');
  });

  it('refused requests consume nothing: the day count is the same before and after', async () => {
    startDay();
    const { auth, id } = await createKey(product, { plan: 'free', limits: { perMinute: 3, perDay: 1000 } });
    await sequentially(3, () => get(auth).expect(200));
    const before = await usageOf(product, id);
    expect(before.day.remaining).toBe(997);
    expect(before.minute.remaining).toBe(0);

    const refused = await sequentially(5, () => get(auth));
    expect(refused.map((r) => r.status)).toEqual(Array(5).fill(429));
    for (const res of refused) expect(parseRateLimit(header(res, 'ratelimit')!).day!.remaining).toBe(997);
    const after = await usageOf(product, id);
    expect(after.day).toEqual(before.day);
    expect(after.minute).toEqual(before.minute);

    clock.advance(60_000);
    const served = await get(auth).expect(200);
    expect(parseRateLimit(header(served, 'ratelimit')!)).toMatchObject({
      minute: { remaining: 2 },
      day: { remaining: 996 },
    });
    expect((await usageOf(product, id)).day.remaining).toBe(996);
  });

  it('X-RateLimit-* follow the day window once it has fewer units left than the minute', async () => {
    const start = startDay();
    const minuteEnd = Math.ceil((start + 45_000) / 1000);
    const { auth } = await createKey(product, { plan: 'enterprise', limits: { perMinute: 10, perDay: 12 } });
    const shown = (await sequentially(4, () => get(auth))).map((r) => {
      const { limit, remaining, reset } = expectRateLimitHeaders(r);
      return [limit, remaining, reset];
    });
    // Minute 10 vs day 12: the minute has fewer left, so it binds.
    expect(shown).toEqual([9, 8, 7, 6].map((left) => [10, left, minuteEnd]));

    clock.advance(60_000);
    const nextMinute = expectRateLimitHeaders(await get(auth));
    // Minute: 9 left; day: 12 − 5 = 7 left: the day binds and its reset is midnight.
    expect([nextMinute.limit, nextMinute.remaining, nextMinute.reset]).toEqual([
      12,
      7,
      Math.ceil(start / 86_400_000) * 86_400,
    ]);
  });

  it('a tie shows the minute window', async () => {
    startDay();
    const { auth } = await createKey(product, { plan: 'enterprise', limits: { perMinute: 5, perDay: 5 } });
    const res = await get(auth).expect(200);
    const headers = expectRateLimitHeaders(res);
    expect([headers.limit, headers.remaining]).toEqual([5, 4]);
    expect(headers.reset).toBe(Math.ceil((clock.now() + 45_000) / 1000));
  });
});
