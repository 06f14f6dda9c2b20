import { Registry } from 'prom-client';
import { connectRedis, type RedisClient } from '../../../src/shared/redis/redis';
import { createLogger } from '../../../src/shared/logger';
import { createKeyDurabilityMetrics } from '../../../src/keys/durability/key-durability-metrics';
import { checkRedisDurability } from '../../../src/keys/durability/redis-durability-check';
import { startRedisServer, type RedisProcess } from '../../support/redis-server';
import { LogCapture } from '../../support/product-harness';
import { logLinesWith } from '../../support/log-lines';

/**
 * The startup check of CONTRACT §4 on real redis-servers: persistence off, an evicting policy, a
 * safe setup, and a user whose ACL refuses CONFIG GET (reported as unknown).
 */

const servers: RedisProcess[] = [];
const clients: RedisClient[] = [];

afterAll(async () => {
  for (const c of clients) c.disconnect();
  for (const s of servers) await s.stop();
});

async function check(args: string[], username?: string, password?: string, aclUser?: string[]) {
  const server = await startRedisServer(args);
  servers.push(server);
  if (aclUser) {
    const admin = await connectRedis({ url: server.url, clusterNodes: [], commandTimeoutMs: 5000 } as never);
    await admin.call('ACL', 'SETUSER', ...aclUser);
    admin.disconnect();
  }
  const client = await connectRedis({
    url: server.url,
    clusterNodes: [],
    commandTimeoutMs: 5000,
    username: username ?? null,
    password: password ?? null,
  } as never);
  clients.push(client);
  const logs = new LogCapture();
  const metrics = createKeyDurabilityMetrics();
  const registry = new Registry();
  metrics.register(registry);
  const risks = await checkRedisDurability(client, createLogger('info', logs), metrics.dataAtRisk);
  const gauge = (await registry.getSingleMetricAsString('gateway_store_data_at_risk'))
    .split('\n')
    .filter((l) => !l.startsWith('#'))
    .sort();
  return {
    risks: [...risks].sort(),
    warnings: logLinesWith(logs, { level: 40 }).map((l) => l.msg),
    gauge,
  };
}

test('persistence off and an allkeys policy are each a warning naming the setting, and the gauge', async () => {
  const result = await check(['--maxmemory-policy', 'allkeys-lru']);
  expect(result.risks).toEqual(['evicting_policy', 'persistence_off']);
  expect(result.warnings).toEqual([
    expect.stringMatching(/save "" and appendonly no.*restart comes back empty/),
    expect.stringMatching(/maxmemory-policy allkeys-lru can evict key records/),
  ]);
  expect(result.gauge).toEqual([
    'gateway_store_data_at_risk{reason="evicting_policy"} 1',
    'gateway_store_data_at_risk{reason="persistence_off"} 1',
    'gateway_store_data_at_risk{reason="unknown"} 0',
  ]);
});

test('AOF on and noeviction (or a volatile policy): no warning, gauge 0', async () => {
  for (const policy of ['noeviction', 'volatile-lru']) {
    const result = await check(['--appendonly', 'yes', '--maxmemory-policy', policy]);
    expect(result).toMatchObject({ risks: [], warnings: [] });
  }
});

test("the gateway's ACL refuses CONFIG GET: unknown, said so, not an error", async () => {
  const acl = [
    'gw',
    'on',
    '>secret-password-1234',
    'resetkeys',
    '~ns:*',
    '-@all',
    '+hello',
    '+auth',
    '+ping',
    '+info',
    '+evalsha',
    '+get',
  ];
  const result = await check([], 'gw', 'secret-password-1234', acl);
  expect(result.risks).toEqual(['unknown']);
  expect(result.warnings).toEqual([expect.stringMatching(/refused CONFIG GET.*unknown/)]);
});
