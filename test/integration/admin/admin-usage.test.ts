import { ManualClock } from '../../../src/shared/clock';
import { startTestProduct, type ProductHarness } from '../../support/product-harness';
import { adminRequest, gatewayGet } from './admin-kit';
import { expectError } from '../../support/errors';
import { createKey } from '../../support/keys';

/**
 * GET /admin/keys/{id} usage and bannedUntil, and DELETE /admin/keys/{id}/ban. The product runs on
 * a clock the test holds still (windows and bans follow it, also on Redis), so counts and instants
 * are exact and no minute turns over mid-test.
 */

const BAN_SECONDS = 900;
let clock: ManualClock;
let product: ProductHarness;

beforeAll(async () => {
  // Mid-minute, mid-day: nothing the tests advance reaches the next UTC day. The inventory checks
  // the gateway's signed tokens on the same clock.
  clock = new ManualClock(Date.UTC(2026, 2, 10, 12, 30, 30));
  product = await startTestProduct({
    clock,
    overrides: { ban: { threshold: 2, windowSeconds: 60, durationSeconds: BAN_SECONDS } },
  });
});

afterAll(async () => {
  await product.close();
});

interface Shown {
  usage: {
    minute: { limit: number; remaining: number; reset: number };
    day: { limit: number; remaining: number; reset: number };
  };
  bannedUntil: string | null;
}

async function show(id: string): Promise<Shown> {
  return (await adminRequest(product, 'get', `/admin/keys/${id}`).expect(200)).body as Shown;
}

test('usage reflects traffic at the gateway, with reset instants of both windows', async () => {
  const created = await createKey(
    product,
    { name: 'counted', plan: 'free', limits: { perMinute: 5, perDay: 100 } },
    { overApi: true },
  );
  const nextMinute = Math.ceil((clock.now() + 1) / 60_000) * 60;
  const nextDay = Math.ceil((clock.now() + 1) / 86_400_000) * 86_400;
  expect((await show(created.id)).usage).toEqual({
    minute: { limit: 5, remaining: 5, reset: nextMinute },
    day: { limit: 100, remaining: 100, reset: nextDay },
  });

  await gatewayGet(product, created.key).expect(200);
  await gatewayGet(product, created.key).expect(200);
  const afterTwo = await show(created.id);
  expect({ usage: afterTwo.usage, bannedUntil: afterTwo.bannedUntil }).toEqual({
    usage: {
      minute: { limit: 5, remaining: 3, reset: nextMinute },
      day: { limit: 100, remaining: 98, reset: nextDay },
    },
    bannedUntil: null,
  });
  // Showing usage consumes nothing.
  expect((await show(created.id)).usage.minute.remaining).toBe(3);

  // A new minute restores the minute window; the day keeps its count.
  clock.advance(60_000);
  expect((await show(created.id)).usage).toEqual({
    minute: { limit: 5, remaining: 5, reset: nextMinute + 60 },
    day: { limit: 100, remaining: 98, reset: nextDay },
  });
});

test('a key hammered past its limit and the ban threshold shows bannedUntil; DELETE /ban lifts it', async () => {
  const created = await createKey(
    product,
    { name: 'hammered', plan: 'free', limits: { perMinute: 1, perDay: 100 } },
    { overApi: true },
  );
  expect((await show(created.id)).bannedUntil).toBeNull();

  const codes: string[] = [];
  for (let i = 0; i < 10 && codes[codes.length - 1] !== 'temporarily_banned'; i++) {
    const res = await gatewayGet(product, created.key);
    codes.push(res.status === 200 ? 'ok' : (res.body as { code: string }).code);
  }
  // One admitted, then refusals; the refusal after the threshold (2) bans the key.
  expect(codes).toEqual(['ok', 'rate_limited', 'rate_limited', 'rate_limited', 'temporarily_banned']);

  const banned = await show(created.id);
  expect(banned.bannedUntil).toBe(new Date(clock.now() + BAN_SECONDS * 1000).toISOString());
  expect(Date.parse(banned.bannedUntil!)).toBeGreaterThan(clock.now());
  expect(banned.usage.minute).toEqual(expect.objectContaining({ limit: 1, remaining: 0 }));

  const lifted = await adminRequest(product, 'delete', `/admin/keys/${created.id}/ban`);
  expect(lifted.status).toBe(204);
  expect(lifted.text).toBe('');
  expect((await show(created.id)).bannedUntil).toBeNull();

  // No longer banned; the minute window is still used up, so the next answer is a plain 429.
  expectError(await gatewayGet(product, created.key), 429, 'rate_limited');
  clock.advance(60_000);
  await gatewayGet(product, created.key).expect(200);
});

test('a ban ends by itself once its time has passed', async () => {
  const created = await createKey(
    product,
    { name: 'patient', plan: 'free', limits: { perMinute: 1, perDay: 100 } },
    { overApi: true },
  );
  for (let i = 0; i < 5; i++) await gatewayGet(product, created.key);
  expect((await show(created.id)).bannedUntil).not.toBeNull();
  clock.advance(BAN_SECONDS * 1000);
  expect((await show(created.id)).bannedUntil).toBeNull();
  await gatewayGet(product, created.key).expect(200);
});
