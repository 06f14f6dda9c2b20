import { ManualClock } from '../../../src/shared/clock';
import { connectRedis, type RedisClient } from '../../../src/shared/redis/redis';
import { createLimiters, type KeyDecision, type KeyRef, type Limiters } from '../../../src/limits';
import { useRedisPerFile } from '../../support/redis-per-file';
import { uniqueNamespace } from '../../support/test-redis';

/**
 * A lease taken before Redis lost its data gives nothing back to the windows that started again
 * after (lua-model.ts admit_windows and add_to_month note when a hash began counting, bt;
 * lease-scripts.ts give_back refuses a window born after the lease). Before, its unused units came
 * off the fresh window's count, which held none of them: the restarted window then admitted that
 * many more than its limit. Two instances' limiters on this file's own redis-server (FLUSHALL on it
 * is the loss), one injected clock.
 */
const redis = useRedisPerFile();
/** 2026-03-02 10:00:05 UTC: 55 s left in the minute, the month started on the 1st. */
const START = Date.UTC(2026, 2, 2, 10, 0, 5);
const LIMITS = { perMinute: 800, perDay: 100_000, perMonth: 1_000_000 };
const clients: RedisClient[] = [];

afterAll(async () => {
  for (const client of clients) await client.quit();
});

async function instance(namespace: string, clock: ManualClock, leases: boolean): Promise<Limiters> {
  const client = await connectRedis({ url: redis.url, clusterNodes: [], commandTimeoutMs: 5000 });
  clients.push(client);
  return createLimiters({
    redis: client,
    namespace,
    ban: { threshold: 100, windowSeconds: 60, durationSeconds: 60 },
    anonymousPerMinute: 60,
    clock,
    failMode: 'closed',
    ...(leases ? { leasesEnabled: () => true } : {}),
  });
}

async function sendUntil(limiter: Limiters, clock: ManualClock, key: KeyRef, done: (d: KeyDecision) => boolean) {
  for (let i = 0; i < 2_000; i++) {
    const decision = await limiter.keyLimiter.consume(key, LIMITS);
    clock.advance(1);
    if (done(decision)) return decision;
  }
  throw new Error('not within 2,000 requests');
}

test("a lease out when Redis lost its data gives back nothing to the key's restarted minute, day and month", async () => {
  const clock = new ManualClock(START);
  const namespace = uniqueNamespace('loss');
  // A leases; B decides every request in Redis, so the windows count exactly its requests.
  const [a, b] = [await instance(namespace, clock, true), await instance(namespace, clock, false)];
  const key = { keyId: 'key_lease_across_loss' };
  try {
    // A holds a lease of the key with units left.
    await sendUntil(a, clock, key, (d) => d.outcome === 'allowed' && d.fromLease === true);
    const lease = a.leases!.book.get(key.keyId)!;
    const unused = lease.units - lease.used;
    expect(unused).toBeGreaterThan(0);

    // Redis loses everything; B's requests start the key's windows again, more than the lease's units.
    await clients[0]!.flushall();
    const afterLoss = unused + 5;
    for (let i = 0; i < afterLoss; i++) {
      expect((await b.keyLimiter.consume(key, LIMITS)).outcome).toBe('allowed');
      clock.advance(1);
    }

    // A's lease ends and its unused units are sent back: none of them are in these windows.
    await a.close();
    const usage = await b.keyLimiter.usage(key, LIMITS);
    expect(usage.minute.remaining).toBe(LIMITS.perMinute - afterLoss);
    expect(usage.day.remaining).toBe(LIMITS.perDay - afterLoss);
    expect(usage.month!.remaining).toBe(LIMITS.perMonth - afterLoss);
  } finally {
    await a.close();
    await b.close();
  }
});
