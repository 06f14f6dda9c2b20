import { ManualClock } from '../../../src/shared/clock';
import { connectRedis, type RedisClient } from '../../../src/shared/redis/redis';
import { createLimiters, type KeyDecision, type KeyRef, type Limiters } from '../../../src/limits';
import { banNoticesChannel, redisBanNotices } from '../../../src/limits/leases/ban-notices';
import { startRedisServer } from '../../support/redis-server';
import { eventually } from '../../support/eventually';
import { uniqueNamespace } from '../../support/test-redis';
import { useRedisPerFile } from '../../support/redis-per-file';

/**
 * A ban set by another instance ends this instance's lease of the key at once (docs/scaling.md
 * "Leases", src/limits/leases/ban-notices.ts): the key's next request here meets the ban in Redis
 * instead of being admitted from the lease for the rest of its life. Two instances' limiters as the
 * product builds them (createLimiters), on one Redis, one injected clock (the lease cannot end by
 * time while the test waits for the notice).
 */
const redis = useRedisPerFile();
const BAN = { threshold: 3, windowSeconds: 60, durationSeconds: 60 };
/** 2026-03-02 10:00:05 UTC: 55 s left in the minute. */
const START = Date.UTC(2026, 2, 2, 10, 0, 5);
const LIMITS = { perMinute: 800, perDay: 100_000 };
const clients: RedisClient[] = [];
const limiters: Limiters[] = [];

afterAll(async () => {
  for (const limiter of limiters) await limiter.close();
  for (const client of clients) await client.quit();
});

async function instance(namespace: string, clock: ManualClock): Promise<Limiters> {
  const client = await connectRedis({ url: redis.url, clusterNodes: [], commandTimeoutMs: 5000 });
  clients.push(client);
  const limiter = createLimiters({
    redis: client,
    namespace,
    ban: BAN,
    anonymousPerMinute: 60,
    clock,
    failMode: 'closed',
    leasesEnabled: () => true,
  });
  limiters.push(limiter);
  return limiter;
}

/** Requests of `key` on `limiter`, one each `everyMs` of the clock, until `done` says so (at most `max`). */
async function sendUntil(
  limiter: Limiters,
  clock: ManualClock,
  key: KeyRef,
  everyMs: number,
  done: (decision: KeyDecision) => boolean,
  max = 2_000,
): Promise<KeyDecision> {
  for (let i = 0; i < max; i++) {
    const decision = await limiter.keyLimiter.consume(key, LIMITS);
    clock.advance(everyMs);
    if (done(decision)) return decision;
  }
  throw new Error(`not within ${max} requests`);
}

test("a ban B's refusals set ends A's lease of the key: A's next request is refused as banned, not admitted from the lease", async () => {
  const clock = new ManualClock(START);
  const namespace = uniqueNamespace('lb');
  const [a, b] = [await instance(namespace, clock), await instance(namespace, clock)];
  const key = { keyId: 'key_banned_elsewhere' };
  // Both instances hear the ban notices before any is published.
  const channel = banNoticesChannel(namespace);
  const subscribers = async () => Number(((await clients[0]!.call('PUBSUB', 'NUMSUB', channel)) as unknown[])[1]);
  await eventually(async () => (await subscribers()) === 2, { what: 'both instances subscribed' });

  // A is busy with the key until it admits from a lease, which it then holds with units left.
  await sendUntil(a, clock, key, 1, (d) => d.outcome === 'allowed' && d.fromLease === true);
  expect(a.leases!.book.get(key.keyId)).toBeDefined();

  // B fills what the window has left outside A's lease, then keeps asking until its refusals ban the
  // key; the clock stands still meanwhile, so A's lease is still alive (its life is 500 ms) when B is banned.
  const banned = await sendUntil(b, clock, key, 0, (d) => d.outcome === 'limited' && d.bannedNow);
  expect(banned.outcome).toBe('limited');
  expect(a.leases!.book.get(key.keyId)).toBeDefined();

  // The notice reaches A: its lease of the key ends (its unused units go back), with no request of A's.
  await eventually(() => a.leases!.book.get(key.keyId) === undefined, { what: "A's lease ended by B's ban" });
  const next = await a.keyLimiter.consume(key, LIMITS);
  expect(next.outcome).toBe('banned');
});

test('an instance that started while Redis was away subscribes again and hears bans once Redis is back', async () => {
  const server = await startRedisServer();
  const client = await connectRedis({ url: server.url, clusterNodes: [], commandTimeoutMs: 1000 });
  const namespace = uniqueNamespace('lb');
  await server.stop();
  // Redis is away: the first subscription gives up (its connect timeout), and is tried again.
  const notices = redisBanNotices(client, namespace);
  const heard: string[] = [];
  notices.onBan((keyId) => heard.push(keyId));
  try {
    // Longer than the subscriber's connect timeout (5 s, duplicateForSubscribe): the first try has failed.
    await new Promise((resolve) => setTimeout(resolve, 6_000));
    const again = await startRedisServer([], server.port);
    try {
      const publisher = await connectRedis({ url: again.url, clusterNodes: [], commandTimeoutMs: 1000 });
      try {
        await eventually(
          async () => {
            await publisher.publish(banNoticesChannel(namespace), 'key_heard_after_restart');
            return heard.includes('key_heard_after_restart');
          },
          { timeoutMs: 15_000, pollMs: 250, what: 'a ban notice heard after Redis came back' },
        );
      } finally {
        publisher.disconnect();
      }
    } finally {
      await notices.close();
      client.disconnect();
      await again.stop();
    }
  } finally {
    await notices.close();
  }
}, 40_000);

test('a subscription that came back may have missed a ban: every lease of that instance ends, its units go back, and Redis decides the next request', async () => {
  const clock = new ManualClock(START);
  const namespace = uniqueNamespace('lb');
  const a = await instance(namespace, clock);
  const key = { keyId: 'key_notice_maybe_missed' };
  const channel = banNoticesChannel(namespace);
  const observer = clients[clients.length - 1]!;
  const subscribers = async () => Number(((await observer.call('PUBSUB', 'NUMSUB', channel)) as unknown[])[1]);
  await eventually(async () => (await subscribers()) === 1, { what: 'A subscribed' });
  await sendUntil(a, clock, key, 1, (d) => d.outcome === 'allowed' && d.fromLease === true);
  expect(a.leases!.book.get(key.keyId)).toBeDefined();

  // A's subscriber connection drops (a network blip); ioredis subscribes again by itself. A notice
  // published in between would be lost, so the lease cannot be trusted to hear one.
  const pubsubClients = ((await observer.call('CLIENT', 'LIST', 'TYPE', 'pubsub')) as string)
    .split('\n')
    .filter((line) => line.length > 0);
  for (const line of pubsubClients) await observer.call('CLIENT', 'KILL', 'ID', /id=(\d+)/.exec(line)![1]!);
  await eventually(() => a.leases!.book.get(key.keyId) === undefined, { what: "A's lease ended on the resubscribe" });
  await eventually(async () => (await subscribers()) === 1, { what: 'A subscribed again' });
  const next = await a.keyLimiter.consume(key, LIMITS);
  expect(next).toMatchObject({ outcome: 'allowed' });
  expect((next as { fromLease?: boolean }).fromLease).not.toBe(true);
});
