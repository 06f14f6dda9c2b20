import { ManualClock } from '../../../src/shared/clock';
import { connectRedis, type RedisClient } from '../../../src/shared/redis/redis';
import { RedisKeyLimiter } from '../../../src/limits/redis/redis-key-limiter';
import { LeasingKeyLimiter } from '../../../src/limits/leases/leasing-key-limiter';
import type { ConsumeOptions, ConsumerShare, KeyRef, WindowLimits } from '../../../src/limits/types';
import { uniqueNamespace } from '../../support/test-redis';
import { useRedisPerFile } from '../../support/redis-per-file';

/**
 * A window reset on one instance while another holds a lease of the key (docs/scaling.md "Leases"):
 * the restarted window counts the units still out in leases, so it never admits more than its limit,
 * whichever instance admits them. Two LeasingKeyLimiters on one Redis and one injected clock.
 */
const redis = useRedisPerFile();
const BAN = { threshold: 1_000_000, windowSeconds: 60, durationSeconds: 60 };
/** 2026-03-02 10:00:05 UTC: 55 s left in the minute. */
const START = Date.UTC(2026, 2, 2, 10, 0, 5);
const clients: RedisClient[] = [];

afterAll(async () => {
  for (const client of clients) await client.quit();
});

async function instance(namespace: string, clock: ManualClock) {
  const client = await connectRedis({ url: redis.url, clusterNodes: [], commandTimeoutMs: 5000 });
  clients.push(client);
  const store = new RedisKeyLimiter(client, { namespace, ban: BAN, clock });
  return { store, leasing: new LeasingKeyLimiter(store, { clock, enabled: () => true, sweepMs: 3_600_000 }) };
}

type Instance = Awaited<ReturnType<typeof instance>>;

/** A's requests until it admits from a lease; then B resets; then A and B in turn until both are refused. */
async function afterReset(
  a: Instance,
  b: Instance,
  clock: ManualClock,
  key: KeyRef,
  limits: WindowLimits,
  reset: () => Promise<unknown>,
  options?: ConsumeOptions,
): Promise<number> {
  for (let i = 0; i < 100 && a.leasing.admissions.lease === 0; i++) {
    await a.leasing.consume(key, limits, options);
    clock.advance(1);
  }
  expect(a.leasing.admissions.lease).toBeGreaterThan(0);
  await reset();
  let admitted = 0;
  let refusedInARow = 0;
  for (let i = 0; i < 2_000 && refusedInARow < 4; i++) {
    const d = await (i % 2 === 0 ? a : b).leasing.consume(key, limits, options);
    if (d.outcome === 'allowed') {
      admitted++;
      refusedInARow = 0;
    } else refusedInARow++;
  }
  return admitted * (options?.cost ?? 1);
}

describe('a window reset while another instance holds a lease', () => {
  it("a key's reset on B: the restarted minute admits no more than its limit, A's lease included", async () => {
    const clock = new ManualClock(START);
    const namespace = uniqueNamespace('lr');
    const [a, b] = [await instance(namespace, clock), await instance(namespace, clock)];
    const key = { keyId: 'key_reset_two' };
    const limits = { perMinute: 800, perDay: 100_000, perMonth: 1_000_000 };
    const used = await afterReset(a, b, clock, key, limits, () => b.leasing.resetWindows(key, ['minute', 'day']));
    console.log(`key reset: the restarted minute admitted ${used} units (limit ${limits.perMinute})`);
    expect(used).toBeLessThanOrEqual(limits.perMinute);
    expect(used).toBeGreaterThan(limits.perMinute - 200);
    await a.leasing.close();
    await b.leasing.close();
  });

  it("a consumer's reset on B: its restarted minute admits no more than its limit", async () => {
    const clock = new ManualClock(START);
    const namespace = uniqueNamespace('lr');
    const [a, b] = [await instance(namespace, clock), await instance(namespace, clock)];
    const key = { keyId: 'key_reset_con', consumerId: 'con_reset' };
    const limits = { perMinute: 100_000, perDay: 1_000_000 };
    const consumer: ConsumerShare = { id: 'con_reset', limits: { perMinute: 800, perDay: 50_000 }, billingDay: 1 };
    const used = await afterReset(
      a,
      b,
      clock,
      key,
      limits,
      () => b.leasing.resetConsumerWindows(consumer, ['minute', 'day']),
      { consumer },
    );
    console.log(`consumer reset: the restarted minute admitted ${used} units (limit 800)`);
    expect(used).toBeLessThanOrEqual(800);
    expect(used).toBeGreaterThan(800 - 200);
    await a.leasing.close();
    await b.leasing.close();
  });

  it('a reset on the instance that holds the lease: its lease ends first, the restarted windows start from zero', async () => {
    const clock = new ManualClock(START);
    const { store, leasing } = await instance(uniqueNamespace('lr'), clock);
    const key = { keyId: 'key_reset_own' };
    const limits = { perMinute: 100_000, perDay: 1_000_000, perMonth: 10_000_000 };
    for (let i = 0; i < 200 && leasing.admissions.lease < 50; i++) {
      await leasing.consume(key, limits);
      clock.advance(1);
    }
    expect(leasing.admissions.lease).toBeGreaterThanOrEqual(50);
    await leasing.resetWindows(key, ['minute', 'day', 'month']);
    const usage = await store.usage(key, limits);
    expect([usage.minute, usage.day, usage.month!].map((w) => w.limit - w.remaining)).toEqual([0, 0, 0]);
    await leasing.close();
  });

  it("a consumer's reset on the instance whose lease of its key was spent: the restarted windows start from zero", async () => {
    const clock = new ManualClock(START);
    const { store, leasing } = await instance(uniqueNamespace('lr'), clock);
    const key = { keyId: 'key_spent_con', consumerId: 'con_spent' };
    const limits = { perMinute: 100_000, perDay: 1_000_000 };
    const consumer: ConsumerShare = {
      id: 'con_spent',
      limits: { perMinute: 100_000, perDay: 1_000_000 },
      billingDay: 1,
    };
    // Until a lease has been spent to its last unit: it ended with nothing to give back (the ledger still holds it).
    for (let i = 0; i < 2_000 && !(leasing.admissions.lease > 0 && leasing.book.size === 0); i++) {
      await leasing.consume(key, limits, { consumer });
      clock.advance(1);
    }
    expect({ leased: leasing.admissions.lease > 0, out: leasing.book.size }).toEqual({ leased: true, out: 0 });
    await leasing.resetConsumerWindows(consumer, ['minute', 'day']);
    const windows = await store.consumerUsage(consumer);
    expect([windows.minute!, windows.day!].map((w) => w.limit - w.remaining)).toEqual([0, 0]);
    await leasing.close();
  });
});

test('a reset on the instance that leases: requests sent while it runs count once, before it or after it, none on both sides', async () => {
  const clock = new ManualClock(START);
  const namespace = uniqueNamespace('lrs');
  const a = await instance(namespace, clock);
  const key: KeyRef = { keyId: 'key_reset_here' };
  const limits = { perMinute: 100_000, perDay: 100_000 };
  let sent = 0;
  for (let i = 0; i < 100 && a.leasing.admissions.lease === 0; i++, sent++) {
    await a.leasing.consume(key, limits);
    clock.advance(1);
  }
  expect(a.leasing.admissions.lease).toBeGreaterThan(0);
  // The reset ends A's lease and sends its return; 40 requests come in while that round trip is
  // under way, the key still busy: before, the first took a lease that Redis counted before the
  // reset ran, so the reset restarted the windows from its units and the requests it admitted
  // counted on both sides.
  const reset = a.leasing.resetWindows(key, ['minute', 'day']);
  const during = await Promise.all(Array.from({ length: 40 }, () => a.leasing.consume(key, limits)));
  sent += during.length;
  expect(during.every((d) => d.outcome === 'allowed')).toBe(true);
  const held = await reset;
  await a.leasing.close();
  const after = await a.store.usage(key, limits);
  const countedDay = held.day! + limits.perDay - after.day.remaining;
  expect(countedDay).toBe(sent);
});
