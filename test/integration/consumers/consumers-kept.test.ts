import { connectRedis, type RedisClient } from '../../../src/shared/redis';
import { redisConsumerLayout } from '../../../src/consumers/redis-consumer-store';
import { startRedisServer, type RedisProcess } from '../../support/redis-server';
import { startTestProduct, type ProductHarness } from '../../support/product-harness';
import { uniqueNamespace } from '../../support/test-redis';
import { adminRequest, gatewayGet } from '../admin/admin-kit';
import { eventually } from '../../support/eventually';
import { expectError } from '../../support/errors';

/**
 * Consumers are kept like keys (CONTRACT §4): through a Redis that loses its data (the durable copy
 * under DATA_DIR puts them back), and in the export and import, applied whole or not at all.
 * A redis-server of this file's own, so that FLUSHALL touches nothing else.
 */
let redis: RedisProcess;
let client: RedisClient;
let a: ProductHarness;
let b: ProductHarness;
const namespace = uniqueNamespace('consumers-kept');

beforeAll(async () => {
  redis = await startRedisServer();
  client = await connectRedis({ url: redis.url, clusterNodes: [], commandTimeoutMs: 5000 } as never);
  const overrides = { redis: { url: redis.url }, keys: { lossCheckSeconds: 1 } };
  a = await startTestProduct({ namespace, overrides });
  b = await startTestProduct({ namespace: uniqueNamespace('consumers-import'), overrides });
}, 30_000);

afterAll(async () => {
  await Promise.all([a?.close(), b?.close()]);
  client?.disconnect();
  await redis?.stop();
});

it('a consumer survives a Redis that lost its data: back in Redis, its limits enforced again', async () => {
  const consumer = await adminRequest(a, 'post', '/admin/consumers').send({ name: 'Survivor', limits: { perMinute: 2 } });
  const key = await adminRequest(a, 'post', '/admin/keys').send({ name: 'k', plan: 'pro', consumerId: consumer.body.id });
  await client.flushall();
  await eventually(async () => (await client.hexists(redisConsumerLayout(namespace).byId, consumer.body.id)) === 1, { timeoutMs: 10_000 });
  // Logged at error once the restore is done (just after the record is back).
  await eventually(async () => a.logs.text().includes('"reason":"consumers_missing"'), { timeoutMs: 2000 });
  const read = await adminRequest(a, 'get', `/admin/consumers/${consumer.body.id}`);
  expect(read.body).toMatchObject({ id: consumer.body.id, name: 'Survivor', limits: { perMinute: 2 } });
  // Windows restarted from zero (CONTRACT §4); the shared limit holds again.
  await eventually(async () => (await gatewayGet(a, key.body.key)).status === 200, { timeoutMs: 10_000 });
  const statuses: number[] = [];
  for (let i = 0; i < 4; i++) statuses.push((await gatewayGet(a, key.body.key)).status);
  expect(statuses).toContain(429);
});

it('export carries the consumers; import brings them and their keys back, twice changing nothing', async () => {
  const consumer = await adminRequest(a, 'post', '/admin/consumers').send({ name: 'Exported', limits: { perDay: 40 }, billingDay: 12 });
  const key = await adminRequest(a, 'post', '/admin/keys').send({ name: 'exported key', plan: 'pro', consumerId: consumer.body.id });
  const exported = await adminRequest(a, 'get', '/admin/keys/export');
  expect(exported.status).toBe(200);
  const lines = exported.text.trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
  expect(lines).toEqual(expect.arrayContaining([expect.objectContaining({ kind: 'consumer', id: consumer.body.id, name: 'Exported', limits: { perDay: 40 }, billingDay: 12 })]));
  expect(lines).toEqual(expect.arrayContaining([expect.objectContaining({ id: key.body.id, consumerId: consumer.body.id })]));

  const imported = await adminRequest(b, 'post', '/admin/keys/import').set('Content-Type', 'application/x-ndjson').send(exported.text);
  expect(imported.status).toBe(200);
  expect(imported.body.imported).toBe(lines.length);
  const again = await adminRequest(b, 'post', '/admin/keys/import').set('Content-Type', 'application/x-ndjson').send(exported.text);
  expect(again.body).toEqual({ imported: 0, unchanged: lines.length });
  expect((await adminRequest(b, 'get', `/admin/consumers/${consumer.body.id}`)).body).toMatchObject({ name: 'Exported', keyIds: [key.body.id] });
  await eventually(async () => (await gatewayGet(b, key.body.key, '/v1/usage')).body.consumer?.id === consumer.body.id, { timeoutMs: 2000 });
});

it('an import naming an unknown consumer, or whose keys are refused, imports nothing', async () => {
  const before = (await adminRequest(b, 'get', '/admin/consumers')).body.length;
  const own = await adminRequest(b, 'post', '/admin/keys').send({ name: 'holder', plan: 'free' });
  const ownLine = (await adminRequest(b, 'get', '/admin/keys/export')).text.split('\n').find((l) => l.includes(own.body.id))!;
  const consumerLine = JSON.stringify({ v: 1, kind: 'consumer', id: 'con_' + 'a'.repeat(24), name: 'New', limits: {}, billingDay: 1, allowedOperations: null, allowedAddresses: null, createdAt: '2026-01-01T00:00:00.000Z', updatedAt: '2026-01-01T00:00:00.000Z' });
  const orphan = JSON.stringify({ ...JSON.parse(ownLine), id: 'key_' + 'b'.repeat(24), hash: 'c'.repeat(64), consumerId: 'con_' + 'd'.repeat(24) });
  const refused = await adminRequest(b, 'post', '/admin/keys/import').set('Content-Type', 'application/x-ndjson').send(consumerLine + '\n' + orphan + '\n');
  expectError(refused, 400, 'validation_failed');
  expect(refused.body.message).toContain('line 2');
  // The same secret under another id: the keys are refused (409) and the consumer written first is taken back.
  const stolen = JSON.stringify({ ...JSON.parse(ownLine), id: 'key_' + 'e'.repeat(24) });
  expectError(await adminRequest(b, 'post', '/admin/keys/import').set('Content-Type', 'application/x-ndjson').send(consumerLine + '\n' + stolen + '\n'), 409, 'conflict');
  expect((await adminRequest(b, 'get', '/admin/consumers')).body.length).toBe(before);
});
