import Redis from 'ioredis';
import { connectRedis, duplicateForSubscribe, type RedisClient } from '../../../src/shared/redis/redis';
import { RedisKeyStore, redisKeyLayout } from '../../../src/keys/stores/redis-key-store';
import type { KeyChange } from '../../../src/keys/types';
import { startRedisCluster, type RedisCluster } from '../../support/redis-cluster';
import { uniqueNamespace } from '../../support/test-redis';
import { describeKeyStoreContract, newRecord } from '../keys/key-store-contract';
import { eventually } from '../../support/eventually';

/**
 * RedisKeyStore on a three-master Redis Cluster, including its change notifications when the
 * subscriber's connection or its whole node goes away. The cluster keeps serving the slots of live
 * masters when one dies (cluster-require-full-coverage no), as a cluster with replicas would after
 * a failover.
 */
let cluster: RedisCluster;
let redis: RedisClient;

beforeAll(async () => {
  cluster = await startRedisCluster({ masters: 3, extraArgs: ['--cluster-require-full-coverage', 'no'] });
  redis = await connectRedis({ url: null, clusterNodes: cluster.nodes, commandTimeoutMs: 2000 });
  // A node killed below makes the client report errors until it forgets the node.
  redis.on('error', () => {});
}, 120_000);

afterAll(async () => {
  redis?.disconnect();
  await cluster?.stop();
});

describeKeyStoreContract('RedisKeyStore on a Redis Cluster', () =>
  RedisKeyStore.open(redis, { namespace: uniqueNamespace('cl-keys') }),
);

/** The master (port) that serves a key's slot. */
async function masterOf(key: string): Promise<number> {
  const slot = Number(await redis.cluster('KEYSLOT', key));
  const ranges = (await redis.cluster('SLOTS')) as unknown as Array<[number, number, [string, number, ...unknown[]]]>;
  const range = ranges.find(([from, to]) => slot >= from && slot <= to);
  if (!range) throw new Error(`no master serves slot ${slot}`);
  return range[2][1];
}

/** A store whose first subscriber connection is on the given master, and that master's port of it. */
async function storeSubscribedOn(namespace: string, port: number): Promise<RedisKeyStore> {
  let first = true;
  return RedisKeyStore.open(redis, {
    namespace,
    subscriber: async () => {
      if (!first) return duplicateForSubscribe(redis);
      first = false;
      // The subscriber's master is drawn at random; draw until it is the one wanted.
      for (let attempt = 0; attempt < 100; attempt++) {
        const candidate = await duplicateForSubscribe(redis);
        if ((candidate as Redis).options.port === port) return candidate;
        candidate.disconnect();
      }
      throw new Error(`no subscriber landed on port ${port}`);
    },
  });
}

describe('RedisKeyStore change notifications on a Redis Cluster', () => {
  it('a change written through one master reaches a subscriber on another', async () => {
    const namespace = uniqueNamespace('cl-spread');
    const keysMaster = await masterOf(redisKeyLayout(namespace).byHash);
    const elsewhere = cluster.ports.find((port) => port !== keysMaster)!;
    const listener = await storeSubscribedOn(namespace, elsewhere);
    const writer = await RedisKeyStore.open(redis, { namespace });
    try {
      const changes: KeyChange[] = [];
      listener.onChange((change) => changes.push(change));
      const { record } = newRecord();
      await writer.insert(record);
      await eventually(() => changes.some((c) => c.id === record.id), {
        timeoutMs: 2000,
        what: 'change heard on another master',
      });
      // The issued mark travels with the change, and the filter's rebuild reads the hashes on the Cluster.
      const { epoch, seq } = await listener.issuedMark();
      expect(changes).toEqual([{ id: record.id, hash: record.hash, mark: { epoch, seq } }]);
      const scanned: string[] = [];
      await listener.scanIssuedHashes((hashes) => scanned.push(...hashes));
      expect(scanned).toEqual([record.hash]);
    } finally {
      await writer.close();
      await listener.close();
    }
  });

  it('after its subscriber connection is killed, reconnects, asks caches to resync, and hears changes again', async () => {
    const namespace = uniqueNamespace('cl-kill');
    const store = await RedisKeyStore.open(redis, { namespace });
    const writer = await RedisKeyStore.open(redis, { namespace });
    const masters = cluster.ports.map((port) => new Redis(port, '127.0.0.1'));
    try {
      let resyncs = 0;
      store.onResync(() => resyncs++);
      const changes: KeyChange[] = [];
      store.onChange((c) => changes.push(c));

      // Both stores' subscribers go; each reconnects to its node.
      const killed = await Promise.all(
        masters.map((master) => master.client('KILL', 'TYPE', 'PUBSUB') as Promise<number>),
      );
      expect(killed.reduce((sum, n) => sum + n, 0)).toBe(2);

      await eventually(() => resyncs >= 1, { what: 'resync after reconnect' });
      const { record } = newRecord();
      await writer.insert(record);
      await eventually(() => changes.some((c) => c.id === record.id), {
        timeoutMs: 2000,
        what: 'change after reconnect',
      });
    } finally {
      for (const master of masters) master.disconnect();
      await writer.close();
      await store.close();
    }
  });

  // Last: it kills a master for good.
  it('when the subscriber’s master dies, subscribes on another master, resyncs, and hears changes again', async () => {
    const namespace = uniqueNamespace('cl-dead');
    const keysMaster = await masterOf(redisKeyLayout(namespace).byHash);
    const victim = cluster.ports.find((port) => port !== keysMaster)!;
    const store = await storeSubscribedOn(namespace, victim);
    const writer = await RedisKeyStore.open(redis, { namespace });
    try {
      let resyncs = 0;
      store.onResync(() => resyncs++);
      const changes: KeyChange[] = [];
      store.onChange((c) => changes.push(c));

      await cluster.killNode(victim);
      // Ten reconnects (about 3 s), then a new subscriber on a live master.
      await eventually(() => resyncs >= 1, { timeoutMs: 15_000, what: 'resync on another master' });
      const { record } = newRecord();
      await writer.insert(record);
      await eventually(() => changes.some((c) => c.id === record.id), {
        timeoutMs: 2000,
        what: 'change after the node died',
      });
      expect(changes.find((c) => c.id === record.id)).toMatchObject({
        id: record.id,
        hash: record.hash,
        mark: { seq: expect.any(Number) },
      });
    } finally {
      await writer.close();
      await store.close();
    }
  }, 120_000);
});
