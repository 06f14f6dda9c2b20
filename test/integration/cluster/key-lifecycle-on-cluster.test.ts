import { startRedisCluster, type RedisCluster } from '../../support/redis-cluster';
import { uniqueNamespace } from '../../support/test-redis';
import { startTestProduct } from '../../support/product-harness';
import { keyLifecycleSuite, LIFECYCLE_OVERRIDES } from '../keys/key-lifecycle-suite';

/**
 * The key lifecycle on a three-master Redis Cluster: the rotation script writes two hashes and the
 * id index in one slot, usage history lives in one hash per key (its own slot), last use in the key
 * store's slot, the audit trail in one stream. Two instances, A runs the inventory.
 */
keyLifecycleSuite('a three-master Redis Cluster, two instances', async (clock) => {
  const cluster: RedisCluster = await startRedisCluster({ masters: 3 });
  const namespace = uniqueNamespace('lifecycle-cluster');
  const env = { REDIS_CLUSTER_NODES: cluster.nodes.join(',') };
  const overrides = { ...LIFECYCLE_OVERRIDES, redis: { namespace, commandTimeoutMs: 2000 } };
  const a = await startTestProduct({ redis: false, namespace, env, clock, overrides });
  const b = await startTestProduct({
    redis: false,
    namespace,
    env,
    clock,
    overrides: { ...overrides, upstream: { url: a.inventory!.url } },
  });
  return {
    a,
    b,
    close: async () => {
      await b.close();
      await a.close();
      await cluster.stop();
    },
  };
});
