import request from 'supertest';
import { ManualClock } from '../../../src/shared/clock';
import { uniqueNamespace } from '../../support/test-redis';
import { expectMatchesOpenApi } from '../../support/openapi';
import {
  admin,
  countPets,
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

const BAN_SECONDS = 900;
const THRESHOLD = 10;

/**
 * Bans (CONTRACT §4) on two gateway instances sharing one Redis namespace and one injected clock:
 * instance A runs the inventory, instance B forwards to A's inventory.
 */
describe('bans after hammering, shared by two instances', () => {
  const clock = new ManualClock();
  const namespace = uniqueNamespace('ban');
  let a: ProductHarness;
  let b: ProductHarness;
  let epoch = Date.UTC(2026, 4, 1);

  /** Each test starts on a fresh UTC day, at 12:30:15. */
  function startDay(): number {
    epoch += 86_400_000;
    const start = epoch + 12 * 3_600_000 + 30 * 60_000 + 15_000;
    clock.set(start);
    return start;
  }

  const newPet = { name: 'Hammer', categoryId: 7 };
  const post = (product: ProductHarness, auth: string) =>
    request(product.gatewayUrl).post('/v1/pets').set('Authorization', auth).send(newPet);

  /** Uses up the minute (2 served) and refuses it threshold + 1 times: the last refusal bans. */
  async function hammer(auth: string): Promise<request.Response[]> {
    await sequentially(2, () => post(a, auth).expect(201));
    return sequentially(THRESHOLD + 1, (i) => post(i % 2 === 0 ? a : b, auth));
  }

  beforeAll(async () => {
    a = await startTestProduct({ clock, namespace });
    b = await startTestProduct({ clock, namespace, overrides: { upstream: { url: a.inventory!.url } } });
  });

  afterAll(async () => {
    await b?.close();
    await a?.close();
  });

  it('threshold + 1 refusals ban the key: 429 temporarily_banned with Retry-After = seconds left, on both instances', async () => {
    const start = startDay();
    const { auth, id } = await createKey(a, { plan: 'free', limits: { perMinute: 2, perDay: 1000 } });
    const refusals = await hammer(auth);
    // Every refusal up to and including the one that bans is an ordinary rate_limited.
    expect(refusals.map((r) => [r.status, (r.body as { code: string }).code])).toEqual(
      Array(THRESHOLD + 1).fill([429, 'rate_limited']),
    );

    const onA = await post(a, auth);
    expectError(onA, 429, 'temporarily_banned');
    expect(header(onA, 'retry-after')).toBe(String(BAN_SECONDS));
    expect(expectRateLimitHeaders(onA)).toMatchObject({ remaining: 0, reset: (start + BAN_SECONDS * 1000) / 1000 });
    expectMatchesOpenApi('POST', '/pets', onA);

    clock.advance(100_000);
    const onB = await post(b, auth);
    expectError(onB, 429, 'temporarily_banned');
    expect(header(onB, 'retry-after')).toBe(String(BAN_SECONDS - 100));

    // A new minute does not lift it: the ban outlasts the window.
    clock.advance(120_000);
    const later = await request(b.gatewayUrl).get('/v1/pets').set('Authorization', auth);
    expectError(later, 429, 'temporarily_banned');
    expect(header(later, 'retry-after')).toBe(String(BAN_SECONDS - 220));

    const usage = await usageOf(b, id);
    expect(usage.bannedUntil).toBe(new Date(start + BAN_SECONDS * 1000).toISOString());
  });

  it('a banned key never reaches the inventory', async () => {
    startDay();
    const { auth } = await createKey(a, { plan: 'free', limits: { perMinute: 2, perDay: 1000 } });
    await hammer(auth);
    const petsBefore = countPets(a);
    const inventory = watchInventory(a);

    const banned = [
      ...(await sequentially(5, () => post(a, auth))),
      ...(await sequentially(5, () => post(b, auth))),
      ...(await sequentially(5, () => request(b.gatewayUrl).get('/v1/pets/1').set('Authorization', auth))),
    ];
    expect(banned.map((r) => (r.body as { code: string }).code)).toEqual(Array(15).fill('temporarily_banned'));
    expect(inventory.count()).toBe(0);
    expect(countPets(a)).toBe(petsBefore);

    // The watch does see what is forwarded: another key's request through B arrives.
    const other = await createKey(a, { plan: 'free' });
    await post(b, other.auth).expect(201);
    expect(inventory.paths).toEqual(['POST /v1/pets']);
    expect(countPets(a)).toBe(petsBefore + 1);
  });

  it('the ban ends by itself once Retry-After has passed', async () => {
    startDay();
    const { auth } = await createKey(a, { plan: 'free', limits: { perMinute: 2, perDay: 1000 } });
    await hammer(auth);
    const banned = await post(b, auth);
    const retryAfter = Number(header(banned, 'retry-after'));

    clock.advance((retryAfter - 1) * 1000);
    expectError(await post(a, auth), 429, 'temporarily_banned');
    clock.advance(1000);
    expect((await post(a, auth)).status).toBe(201);
  });

  it('admin DELETE /admin/keys/{id}/ban lifts it on every instance; the key is served once its window allows', async () => {
    startDay();
    const { auth, id } = await createKey(a, { plan: 'free', limits: { perMinute: 2, perDay: 1000 } });
    await hammer(auth);
    expectError(await post(b, auth), 429, 'temporarily_banned');
    expect((await usageOf(a, id)).bannedUntil).not.toBeNull();

    await admin(a).delete(`/admin/keys/${id}/ban`).expect(204);
    expect((await usageOf(b, id)).bannedUntil).toBeNull();

    // Still inside the used-up minute: refused by the window, no longer banned.
    const windowRefusal = await post(b, auth);
    expectError(windowRefusal, 429, 'rate_limited');
    const retryAfter = Number(header(windowRefusal, 'retry-after'));

    clock.advance(retryAfter * 1000);
    const served = await post(b, auth);
    expect(served.status).toBe(201);
    expect(expectRateLimitHeaders(served)).toMatchObject({ limit: 2, remaining: 1 });
  });

  it('the ban is counted in gateway_key_bans_total and the ban window of rejections', async () => {
    startDay();
    const { auth } = await createKey(a, { plan: 'pro', limits: { perMinute: 2, perDay: 1000 } });
    await hammer(auth);
    await post(a, auth).expect(429);
    const metrics = (await request(a.adminUrl).get('/metrics').expect(200)).text;
    expect(metrics).toMatch(/^gateway_key_bans_total\{plan="pro"\} [1-9]\d*$/m);
    expect(metrics).toMatch(/^gateway_ratelimit_rejections_total\{plan="pro",window="ban"\} [1-9]\d*$/m);
  });
});
