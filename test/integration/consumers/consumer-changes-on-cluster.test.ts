import Redis from 'ioredis';
import { connectRedis, type RedisClient } from '../../../src/shared/redis/redis';
import { RedisConsumerStore, redisConsumerLayout } from '../../../src/consumers/redis-consumer-store';
import { ConsumerDirectory } from '../../../src/consumers/consumer-directory';
import type { ConsumerRecord } from '../../../src/consumers/types';
import { startRedisCluster, type RedisCluster } from '../../support/redis-cluster';
import { uniqueNamespace } from '../../support/test-redis';
import { eventually } from '../../support/eventually';

/**
 * Consumer changes on a three-master Redis Cluster follow the same change feed as keys: when the
 * node a store's subscriber sits on dies for good, the feed subscribes on a live master and asks
 * for a resync, and changes are heard again within the contract's second (before: the subscriber
 * gave up, and the directory learned changes only from its 30 s refresh). The cluster keeps serving
 * the live masters' slots (cluster-require-full-coverage no), as one with replicas would after a failover.
 */
let cluster: RedisCluster;
let redis: RedisClient;

beforeAll(async () => {
  cluster = await startRedisCluster({ masters: 3, extraArgs: ['--cluster-require-full-coverage', 'no'] });
  redis = await connectRedis({ url: null, clusterNodes: cluster.nodes, commandTimeoutMs: 2000 });
  redis.on('error', () => {});
}, 120_000);

afterAll(async () => {
  redis?.disconnect();
  await cluster?.stop();
});

async function masterOf(key: string): Promise<number> {
  const slot = Number(await redis.cluster('KEYSLOT', key));
  const ranges = (await redis.cluster('SLOTS')) as unknown as Array<[number, number, [string, number, ...unknown[]]]>;
  const range = ranges.find(([from, to]) => slot >= from && slot <= to);
  if (!range) throw new Error(`no master serves slot ${slot}`);
  return range[2][1];
}

/** Subscriber connections per master, as each master counts them. */
async function subscribersPerPort(): Promise<Map<number, number>> {
  const counts = new Map<number, number>();
  for (const port of cluster.ports) {
    const node = new Redis(port, '127.0.0.1');
    try {
      const list = (await node.client('LIST', 'TYPE', 'PUBSUB')) as string;
      counts.set(port, list.split('\n').filter((line) => line.trim() !== '').length);
    } finally {
      node.disconnect();
    }
  }
  return counts;
}

/** A store whose subscriber sits on a master other than the consumer records' one; and that master. */
async function storeSubscribedAway(namespace: string, recordsMaster: number): Promise<[RedisConsumerStore, number]> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const before = await subscribersPerPort();
    const store = await RedisConsumerStore.open(redis, namespace);
    const after = await subscribersPerPort();
    const port = cluster.ports.find((p) => after.get(p)! > before.get(p)!);
    if (port !== undefined && port !== recordsMaster) return [store, port];
    await store.close();
  }
  throw new Error('no subscriber landed away from the records’ master');
}

function consumer(name: string): ConsumerRecord {
  const now = new Date().toISOString();
  const id = `con_${Math.random().toString(16).slice(2).padEnd(24, '0').slice(0, 24)}`;
  return {
    id,
    name,
    limits: { perMinute: 5 },
    billingDay: 1,
    allowedOperations: null,
    allowedAddresses: null,
    createdAt: now,
    updatedAt: now,
  };
}

it('when the subscriber’s master dies, consumer changes reach the store and its directory within a second again', async () => {
  const namespace = uniqueNamespace('cl-consumers');
  const recordsMaster = await masterOf(redisConsumerLayout(namespace).byId);
  const [listener, victim] = await storeSubscribedAway(namespace, recordsMaster);
  const writer = await RedisConsumerStore.open(redis, namespace);
  const directory = new ConsumerDirectory(listener);
  try {
    await directory.start();
    let resyncs = 0;
    listener.onResync?.(() => resyncs++);
    const heard: string[] = [];
    listener.onChange((id) => heard.push(id));

    await cluster.killNode(victim);
    await eventually(() => resyncs >= 1, { timeoutMs: 15_000, what: 'resync on another master' });
    const record = consumer('after the node died');
    await writer.put(record);
    await eventually(() => heard.includes(record.id), { timeoutMs: 2000, what: 'change heard after the node died' });
    await eventually(() => directory.get(record.id)?.name === record.name, {
      timeoutMs: 2000,
      what: 'the directory follows',
    });
  } finally {
    directory.close();
    await writer.close();
    await listener.close();
  }
}, 120_000);
