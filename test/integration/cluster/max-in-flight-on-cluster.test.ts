import { connectRedis, type RedisClient } from '../../../src/shared/redis/redis';
import { RedisKeyLimiter, keyLimiterRedisKey } from '../../../src/limits/redis/redis-key-limiter';
import { startRedisCluster, type RedisCluster } from '../../support/redis-cluster';
import { uniqueNamespace } from '../../support/test-redis';
import { eventually } from '../../support/eventually';
import { DEFAULT_BAN } from '../../unit/limits/key-limiter-behaviours';

/**
 * maxInFlight on a three-master Redis Cluster: a lease taken near the limit is released at once (a
 * ZREM on its key's master), one below it rides in the key's next consume script
 * (same hash tag, same slot), and the releases no request takes along go in pipelines grouped by
 * hash tag, as an ioredis pipeline must stay in one slot, whichever masters the keys live on.
 */
let cluster: RedisCluster;
let redis: RedisClient;

beforeAll(async () => {
  cluster = await startRedisCluster({ masters: 3 });
  // The premise is a cluster that answers (docs/testing.md, rule 5).
  redis = await connectRedis({ url: null, clusterNodes: cluster.nodes, commandTimeoutMs: 5000 });
}, 120_000);

afterAll(async () => {
  redis?.disconnect();
  await cluster?.stop();
});

const limits = { perMinute: 100_000, perDay: 1_000_000 };
// A lease ttl far beyond any wait here: a slot seen free was released, never expired.
// maxInFlight 1 releases at once (redis-in-flight.ts, isNearLimit); 4 with one lease held waits for a consume or the batch.
const lease = (id: string, max = 1) => ({ inFlight: { max, id, ttlMs: 600_000 } });
const KEYS = Array.from({ length: 12 }, (_, i) => `key-${i}`);

describe('maxInFlight on a Redis Cluster', () => {
  it('admits every request of one-at-a-time clients at maxInFlight 1 on keys spread over the masters (each release sent at once)', async () => {
    const namespace = uniqueNamespace('cl-if');
    const limiter = new RedisKeyLimiter(redis, { namespace, ban: DEFAULT_BAN, releaseFlushMs: 600_000 });
    const slots = new Set(
      await Promise.all(
        KEYS.map((keyId) => redis.cluster('KEYSLOT', keyLimiterRedisKey(namespace, keyId)) as Promise<number>),
      ),
    );
    expect(slots.size).toBe(KEYS.length);
    const outcomes = await Promise.all(
      KEYS.map(async (keyId) => {
        const seen: string[] = [];
        for (let i = 0; i < 10; i++) {
          seen.push((await limiter.consume({ keyId }, limits, lease(`${keyId}-${i}`))).outcome);
          limiter.release({ keyId }, `${keyId}-${i}`);
        }
        return seen;
      }),
    );
    expect(outcomes.flat()).toEqual(Array(KEYS.length * 10).fill('allowed'));
    await limiter.close();
    expect(await Promise.all(KEYS.map((keyId) => redis.zcard(`${keyLimiterRedisKey(namespace, keyId)}:if`)))).toEqual(
      Array(KEYS.length).fill(0),
    );
  });

  it('sends the releases no request takes along to every master in the timed batch', async () => {
    const namespace = uniqueNamespace('cl-if-batch');
    const limiter = new RedisKeyLimiter(redis, { namespace, ban: DEFAULT_BAN });
    for (const keyId of KEYS)
      expect((await limiter.consume({ keyId }, limits, lease(`${keyId}-held`, 4))).outcome).toBe('allowed');
    for (const keyId of KEYS) limiter.release({ keyId }, `${keyId}-held`);
    await eventually(
      async () =>
        (await Promise.all(KEYS.map((keyId) => redis.zcard(`${keyLimiterRedisKey(namespace, keyId)}:if`)))).every(
          (n) => n === 0,
        ),
      {
        timeoutMs: 10_000,
        pollMs: 5,
        what: 'every released lease gone from the cluster',
      },
    );
    for (const keyId of KEYS)
      expect((await limiter.consume({ keyId }, limits, lease(`${keyId}-next`, 4))).outcome).toBe('allowed');
  });
});
