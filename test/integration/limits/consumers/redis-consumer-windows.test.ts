import { connectRedis, type RedisClient } from '../../../../src/shared/redis/redis';
import { RedisKeyLimiter } from '../../../../src/limits/redis/redis-key-limiter';
import { consumerWindowsRedisKey, keyLimiterRedisKey } from '../../../../src/limits/redis/redis-names';
import type { ConsumerShare, KeyDecision } from '../../../../src/limits/types';
import { describeConsumerWindowBehaviours } from '../../../unit/limits/consumer-window-behaviours';
import { DEFAULT_BAN } from '../../../unit/limits/key-limiter-behaviours';
import { startRedisCluster, type RedisCluster } from '../../../support/redis-cluster';
import { startRedisServer, type RedisProcess } from '../../../support/redis-server';
import { uniqueNamespace } from '../../../support/test-redis';

// eslint-disable-next-line @typescript-eslint/no-require-imports -- cluster-key-slot ships no types
const calculateSlot: (key: string) => number = require('cluster-key-slot');

// A consumer's windows and every window of its keys, decided in one script: on one Redis and on a
// Cluster of three masters (where the script may only touch keys of one slot, declared in KEYS).

let redis: RedisProcess;
let cluster: RedisCluster;
const clients: Record<'single' | 'cluster', RedisClient[]> = { single: [], cluster: [] };

beforeAll(async () => {
  [redis, cluster] = await Promise.all([startRedisServer(), startRedisCluster({ masters: 3 })]);
  for (let i = 0; i < 2; i++) {
    clients.single.push(await connectRedis({ url: redis.url, clusterNodes: [], commandTimeoutMs: 5000 }));
    clients.cluster.push(await connectRedis({ url: null, clusterNodes: cluster.nodes, commandTimeoutMs: 5000 }));
  }
  // A hang guard above the Cluster's own (120 s), so that a slow start fails with the kit's message.
}, 150_000);

afterAll(async () => {
  for (const client of [...clients.single, ...clients.cluster]) await client.quit();
  await redis?.stop();
  await cluster?.stop();
});

for (const where of ['single', 'cluster'] as const) {
  const label = where === 'single' ? 'RedisKeyLimiter on one Redis' : 'RedisKeyLimiter on a Redis Cluster';
  describeConsumerWindowBehaviours(label, {
    create: (clock, ban, shape) =>
      new RedisKeyLimiter(clients[where][0]!, { namespace: uniqueNamespace('cw'), ban, clock, minuteWindow: shape }),
  });

  describe(`${label}: exact across instances`, () => {
    for (const shape of ['fixed', 'sliding'] as const) {
      it(`three keys of a consumer with perMinute 50, 200 concurrent requests over two clients: exactly 50 (${shape}, Redis TIME)`, async () => {
        const namespace = uniqueNamespace('cw-exact');
        const [a, b] = clients[where].map(
          (client) => new RedisKeyLimiter(client, { namespace, ban: DEFAULT_BAN, minuteWindow: shape }),
        );
        const consumer: ConsumerShare = { id: 'con_' + 'e'.repeat(24), limits: { perMinute: 50 }, billingDay: 1 };
        const keys = ['key_1', 'key_2', 'key_3'].map((k) => ({ keyId: k, consumerId: consumer.id }));
        const calls: Promise<KeyDecision>[] = [];
        for (let i = 0; i < 200; i++)
          calls.push((i % 2 === 0 ? a! : b!).consume(keys[i % 3]!, { perMinute: 1000, perDay: 1000 }, { consumer }));
        const decisions = await Promise.all(calls);
        expect(decisions.filter((d) => d.outcome === 'allowed')).toHaveLength(50);
        expect((await a!.consumerUsage(consumer)).minute).toMatchObject({ limit: 50, remaining: 0 });
      });
    }
  });
}

describe('hash tags', () => {
  it("a key's windows and its consumer's share one Cluster slot; a key of no consumer keeps its own", () => {
    const ns = 'asg:prod';
    const consumerId = 'con_0123456789abcdef01234567';
    const keyWindows = keyLimiterRedisKey(ns, { keyId: 'key_aaaaaaaaaaaaaaaaaaaaaaaa', consumerId: consumerId });
    expect(keyWindows).toBe('asg:prod:rl:{con_0123456789abcdef01234567}:k:{key_aaaaaaaaaaaaaaaaaaaaaaaa}');
    const slot = calculateSlot(consumerWindowsRedisKey(ns, consumerId));
    expect(calculateSlot(keyWindows)).toBe(slot);
    expect(calculateSlot(keyWindows + ':mo')).toBe(slot);
    expect(calculateSlot(keyWindows + ':log')).toBe(slot);
    expect(
      calculateSlot(keyLimiterRedisKey(ns, { keyId: 'key_bbbbbbbbbbbbbbbbbbbbbbbb', consumerId: consumerId })),
    ).toBe(slot);
    expect(keyLimiterRedisKey(ns, 'key_aaaaaaaaaaaaaaaaaaaaaaaa')).toBe('asg:prod:rl:{key_aaaaaaaaaaaaaaaaaaaaaaaa}');
  });
});
