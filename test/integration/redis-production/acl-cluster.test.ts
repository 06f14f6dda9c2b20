import fs from 'node:fs';
import path from 'node:path';
import Redis from 'ioredis';
import request from 'supertest';
import { startRedisCluster, type RedisCluster } from '../../support/redis-cluster';
import { startTestProduct } from '../../support/product-harness';
import { admin, sequentially } from '../gateway/gateway-kit';
import { createKey } from '../../support/keys';

/**
 * ACL LOG entries other than the startup durability check's CONFIG GET, which the ACL refuses on
 * purpose (CONFIG GET reads passwords too) and which the gateway reports as "unknown".
 */
function refusedCommands(log: unknown): unknown[] {
  return (log as unknown[][]).filter((entry) => entry[entry.indexOf('object') + 1] !== 'config|get');
}

/**
 * The gateway on a Redis Cluster as an ACL user named by REDIS_USERNAME (a Cluster has no REDIS_URL
 * to carry it), with the README's ACL plus the cluster commands of config/redis/gateway-acl-cluster.txt.
 * Every node's ACL LOG must stay empty.
 */

const CONFIG = path.join(__dirname, '..', '..', '..', 'config', 'redis');
const RULES = [
  fs.readFileSync(path.join(CONFIG, 'gateway-acl.txt'), 'utf8'),
  fs.readFileSync(path.join(CONFIG, 'gateway-acl-cluster.txt'), 'utf8'),
]
  .join(' ')
  .trim()
  .replaceAll('{namespace}', 'asg:prod')
  .split(/\s+/);

let cluster: RedisCluster;

beforeAll(async () => {
  cluster = await startRedisCluster({
    masters: 3,
    extraArgs: ['--user', 'asg-prod', 'on', '>cluster-password-0123456789', ...RULES],
  });
}, 120_000);

afterAll(async () => {
  await cluster?.stop();
});

it('serves, limits, bans and revokes on a Cluster as the ACL user of REDIS_USERNAME, with no command refused on any node', async () => {
  const product = await startTestProduct({
    redis: false,
    namespace: 'asg:prod',
    env: {
      REDIS_CLUSTER_NODES: cluster.nodes.join(','),
      REDIS_USERNAME: 'asg-prod',
      REDIS_PASSWORD: 'cluster-password-0123456789',
    },
    overrides: { redis: { namespace: 'asg:prod', commandTimeoutMs: 2000 }, ban: { threshold: 1 } },
  });
  try {
    const { id, auth } = await createKey(product, { plan: 'free', limits: { perMinute: 2, perDay: 100 } });
    const statuses = (
      await sequentially(5, () => request(product.gatewayUrl).get('/v1/pets').set('Authorization', auth))
    ).map((r) => r.status);
    expect(statuses).toEqual([200, 200, 429, 429, 429]);
    await admin(product).delete(`/admin/keys/${id}/ban`).expect(204);
    await admin(product).delete(`/admin/keys/${id}`).expect(204);
    expect((await request(product.gatewayUrl).get('/v1/pets').set('Authorization', auth)).body.code).toBe(
      'revoked_api_key',
    );
    await request(product.gatewayUrl).get('/v1/pets').set('Authorization', 'Bearer asg_dev_unknown').expect(401);
    const second = await createKey(product, { plan: 'pro' });
    await request(product.gatewayUrl).get('/v1/pets/1').set('Authorization', second.auth).expect(404);
    await admin(product).get('/admin/audit').expect(200);
    await admin(product).get(`/admin/keys/${second.id}/usage`).expect(200);
    await request(product.adminUrl).get('/readyz').expect(200);
  } finally {
    // Closing flushes what is batched off the request path (usage, last use, deprecated callers).
    await product.close();
  }
  for (const port of cluster.ports) {
    const node = new Redis(port, '127.0.0.1', { maxRetriesPerRequest: 0 });
    try {
      expect({ port, log: refusedCommands(await node.call('ACL', 'LOG')) }).toEqual({ port, log: [] });
    } finally {
      node.disconnect();
    }
  }
}, 120_000);
