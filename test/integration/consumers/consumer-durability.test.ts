import path from 'node:path';
import Database from 'better-sqlite3';
import { connectRedis, type RedisClient } from '../../../src/shared/redis/redis';
import { consumerReplicaFileName } from '../../../src/consumers/durable-consumer-store';
import { startRedisServer, type RedisProcess } from '../../support/redis-server';
import { startTestProduct, type ProductHarness } from '../../support/product-harness';
import { uniqueNamespace } from '../../support/test-redis';
import { adminRequest } from '../admin/admin-kit';
import { eventually } from '../../support/eventually';

/**
 * Consumers are kept by the same durable copy and loss check as keys (CONTRACT §4): two gateway
 * instances on a redis-server of this file's own. Redis going back in time (what a failover to a
 * replica that missed writes leaves: every consumer key as it was before the writes) puts the
 * consumers it lost back from the copies, where before the copies took Redis's word and deleted
 * them; a consumer deleted on one instance is never put back by the other's copy.
 */
let redis: RedisProcess;
let client: RedisClient;
let a: ProductHarness;
let b: ProductHarness;
const namespace = uniqueNamespace('consumer-durability');

beforeAll(async () => {
  redis = await startRedisServer();
  client = await connectRedis({ url: redis.url, clusterNodes: [], commandTimeoutMs: 5000 } as never);
  const overrides = { redis: { url: redis.url }, keys: { lossCheckSeconds: 1 } };
  [a, b] = await Promise.all([startTestProduct({ namespace, overrides }), startTestProduct({ namespace, overrides })]);
}, 30_000);

afterAll(async () => {
  await Promise.all([a?.close(), b?.close()]);
  client?.disconnect();
  await redis?.stop();
});

/** The ids an instance's durable copy holds, read from its file under DATA_DIR. */
function copyIds(p: ProductHarness): string[] {
  const db = new Database(path.join(p.dataDir, consumerReplicaFileName(namespace)), { readonly: true });
  try {
    return (db.prepare('SELECT id FROM consumers').all() as Array<{ id: string }>).map((row) => row.id);
  } finally {
    db.close();
  }
}

/** Every consumer key of the namespace as DUMPed now: what a replica that stops replicating here holds. */
async function snapshotConsumers(): Promise<Map<string, Buffer>> {
  const keys = await client.keys(`${namespace}:consumers:*`);
  const dumps = new Map<string, Buffer>();
  for (const key of keys) dumps.set(key, (await client.dumpBuffer(key))!);
  return dumps;
}

/** Redis back at the snapshot: keys written since are gone, the others as they were. */
async function rollBackTo(snapshot: Map<string, Buffer>): Promise<void> {
  for (const key of await client.keys(`${namespace}:consumers:*`)) if (!snapshot.has(key)) await client.del(key);
  for (const [key, dump] of snapshot) await client.restore(key, 0, dump, 'REPLACE');
}

async function createConsumer(p: ProductHarness, name: string): Promise<string> {
  const created = await adminRequest(p, 'post', '/admin/consumers').send({ name, limits: { perMinute: 5 } });
  expect(created.status).toBe(201);
  return created.body.id as string;
}

test('a failover to a replica that missed consumer writes: the consumers it lost come back from the copies, not deleted', async () => {
  const older = await createConsumer(a, 'written before the replica stopped');
  await eventually(() => copyIds(a).includes(older) && copyIds(b).includes(older), { what: 'both copies hold it' });
  const snapshot = await snapshotConsumers();
  const missed = [await createConsumer(a, 'missed by the replica'), await createConsumer(b, 'missed too')];
  await eventually(() => missed.every((id) => copyIds(a).includes(id) && copyIds(b).includes(id)), {
    what: 'both copies hold the writes the replica missed',
  });

  await rollBackTo(snapshot);
  expect(await client.hexists(`${namespace}:consumers:{c}:by-id`, missed[0]!)).toBe(0);

  await eventually(
    async () => {
      for (const id of missed) if ((await client.hexists(`${namespace}:consumers:{c}:by-id`, id)) !== 1) return false;
      return true;
    },
    { timeoutMs: 10_000, what: 'the missed consumers back in Redis' },
  );
  for (const p of [a, b])
    for (const id of [older, ...missed])
      expect((await adminRequest(p, 'get', `/admin/consumers/${id}`)).status).toBe(200);
  for (const p of [a, b]) expect(copyIds(p)).toEqual(expect.arrayContaining([older, ...missed]));
  await eventually(() => [a, b].some((p) => p.logs.text().includes('"cause":"records_missing"')), {
    timeoutMs: 2000,
    what: 'the restore logged',
  });
}, 60_000);

test('a consumer deleted while an instance was down is not put back by that instance’s copy when it starts', async () => {
  const deleted = await createConsumer(a, 'to be deleted');
  await eventually(() => copyIds(a).includes(deleted) && copyIds(b).includes(deleted), { what: 'both copies hold it' });
  const dataDir = a.dataDir;
  await a.close();
  expect((await adminRequest(b, 'delete', `/admin/consumers/${deleted}`)).status).toBe(204);
  await eventually(() => !copyIds(b).includes(deleted), { what: "b's copy forgot it" });
  // a's copy still holds it: Redis has fewer consumers than that copy, as after a loss.
  a = await startTestProduct({
    namespace,
    dataDir,
    overrides: { redis: { url: redis.url }, keys: { lossCheckSeconds: 1 } },
  });
  await eventually(() => !copyIds(a).includes(deleted), { what: "a's copy forgot it" });
  // A rollback after it makes both instances restore what their copies hold: still not the deleted one.
  const snapshot = await snapshotConsumers();
  const later = await createConsumer(b, 'written after the deletion');
  await eventually(() => copyIds(a).includes(later), { what: "a's copy holds the later one" });
  await rollBackTo(snapshot);
  await eventually(async () => (await client.hexists(`${namespace}:consumers:{c}:by-id`, later)) === 1, {
    timeoutMs: 10_000,
    what: 'the later one restored',
  });
  expect(await client.hexists(`${namespace}:consumers:{c}:by-id`, deleted)).toBe(0);
  for (const p of [a, b]) expect((await adminRequest(p, 'get', `/admin/consumers/${deleted}`)).status).toBe(404);
}, 60_000);
