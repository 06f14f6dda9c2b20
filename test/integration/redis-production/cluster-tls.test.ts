import Redis from 'ioredis';
import request from 'supertest';
import { startRedisCluster, type RedisCluster } from '../../support/redis-cluster';
import { makeTestCertificates, type TestCertificates } from '../../support/tls-certs';
import { uniqueNamespace } from '../../support/test-redis';
import { startTestProduct } from '../../support/product-harness';
import { admin, sequentially } from '../gateway/gateway-kit';
import { createKey } from '../../support/keys';

/**
 * Redis Cluster with TLS (CONTRACT §2: REDIS_CLUSTER_NODES with the REDIS_TLS_* settings): three
 * masters whose client ports, bus and replication all speak TLS with certificates made by openssl
 * for this run, and the gateway verifying every node with REDIS_TLS_CA_FILE.
 */

let certs: TestCertificates;
let cluster: RedisCluster;

beforeAll(async () => {
  certs = makeTestCertificates();
  cluster = await startRedisCluster({ masters: 3, tls: certs });
}, 120_000);

afterAll(async () => {
  await cluster?.stop();
});

function clusterSettings(namespace: string, caFile: string) {
  return {
    url: null,
    clusterNodes: cluster.tlsNodes,
    tls: { caFile, certFile: null, keyFile: null },
    namespace,
    commandTimeoutMs: 2000,
  };
}

it('serves, limits and revokes on a TLS Cluster, and keeps its keys on the cluster', async () => {
  const namespace = uniqueNamespace('cluster-tls');
  const product = await startTestProduct({
    redis: false,
    namespace,
    overrides: { redis: clusterSettings(namespace, certs.caCert) },
  });
  try {
    const { id, auth } = await createKey(product, { plan: 'free', limits: { perMinute: 2, perDay: 100 } });
    const statuses = (
      await sequentially(3, () => request(product.gatewayUrl).get('/v1/pets').set('Authorization', auth))
    ).map((r) => r.status);
    expect(statuses).toEqual([200, 200, 429]);
    await admin(product).delete(`/admin/keys/${id}`).expect(204);
    expect((await request(product.gatewayUrl).get('/v1/pets').set('Authorization', auth)).body.code).toBe(
      'revoked_api_key',
    );
  } finally {
    await product.close();
  }
  // Looked at through each node's plain port: the key record and the limit windows are on the cluster.
  const keys: string[] = [];
  for (const port of cluster.ports) {
    const node = new Redis(port, '127.0.0.1', { maxRetriesPerRequest: 0 });
    try {
      keys.push(...((await node.keys(`${namespace}:*`)) as string[]));
    } finally {
      node.disconnect();
    }
  }
  expect(keys.some((key) => key.includes(':keys:'))).toBe(true);
  expect(keys.some((key) => key.includes(':rl:{'))).toBe(true);
}, 120_000);

it('a CA that did not sign the certificates: startup stops with one line naming REDIS_TLS_CA_FILE', async () => {
  const namespace = uniqueNamespace('cluster-tls');
  await expect(
    startTestProduct({ redis: false, namespace, overrides: { redis: clusterSettings(namespace, certs.otherCaCert) } }),
  ).rejects.toThrow(/^Redis's TLS certificate failed verification \(.*\); check REDIS_TLS_CA_FILE$/);
}, 120_000);
