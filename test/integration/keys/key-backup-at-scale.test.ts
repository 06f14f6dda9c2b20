import Database from 'better-sqlite3';
import path from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { connectRedis, type RedisClient } from '../../../src/shared/redis/redis';
import { exportLine } from '../../../src/keys/key-export';
import { generateApiKey, generateKeyId, hashApiKey } from '../../../src/keys/key-format';
import { replicaFileName } from '../../../src/keys/durability/key-replica';
import type { ApiKeyRecord } from '../../../src/keys/types';
import { useRedisPerFile } from '../../support/redis-per-file';
import { startTestProduct, type ProductHarness } from '../../support/product-harness';
import { uniqueNamespace } from '../../support/test-redis';
import { keyRecordFixture } from '../../support/key-record';
import { adminRequest, gatewayGet, logRecords } from '../admin/admin-kit';
import { eventually } from '../../support/eventually';
import { expectError } from '../../support/errors';
import { createKey } from '../../support/keys';

/**
 * CONTRACT §4, keys at scale and an import as one action, on a redis-server of this file's own
 * with the default command timeout (200 ms): issue 42's probe imported 20,000 records in one
 * script call of 80,002 arguments (the process died), and 5,000-10,000 records answered 500 while
 * applied, missing from the durable copy, lost for good after a FLUSHALL.
 */

const PREFIX = 'asg_dev_';
const DEFAULT_COMMAND_TIMEOUT_MS = 200;

const redis = useRedisPerFile();
let client: RedisClient;
const started: ProductHarness[] = [];

beforeAll(async () => {
  client = await connectRedis({ url: redis.url, clusterNodes: [], commandTimeoutMs: 5000 } as never);
}, 30_000);

afterAll(async () => {
  for (const p of started) await p.close();
  client?.disconnect();
});

async function instance(namespace = uniqueNamespace('scale')): Promise<ProductHarness> {
  const p = await startTestProduct({
    namespace,
    overrides: {
      redis: { url: redis.url, commandTimeoutMs: DEFAULT_COMMAND_TIMEOUT_MS },
      keys: { lossCheckSeconds: 1 },
    },
  });
  started.push(p);
  return p;
}

interface Generated {
  key: string;
  record: ApiKeyRecord;
}

/** `count` records of keys whose secrets the test holds, as an export would write them. */
function generate(count: number, name = 'bulk'): Generated[] {
  const at = new Date().toISOString();
  return Array.from({ length: count }, (_, i) => {
    const key = generateApiKey(PREFIX);
    return {
      key,
      record: keyRecordFixture({
        id: generateKeyId(),
        name: `${name} ${i}`,
        hash: hashApiKey(key),
        createdAt: at,
        updatedAt: at,
      }),
    };
  });
}

function backupOf(generated: Generated[]): string {
  return generated.map((g) => exportLine(g.record, PREFIX) + '\n').join('');
}

function importBody(p: ProductHarness, body: string) {
  return adminRequest(p, 'post', '/admin/keys/import').set('Content-Type', 'application/x-ndjson').send(body);
}

/** The ids in this instance's durable copy (its SQLite file under DATA_DIR), read as a second reader. */
function replicaIds(p: ProductHarness): Set<string> {
  const db = new Database(path.join(p.dataDir, replicaFileName(p.config.redis.namespace)), { readonly: true });
  try {
    return new Set((db.prepare('SELECT id FROM key_records').all() as Array<{ id: string }>).map((row) => row.id));
  } finally {
    db.close();
  }
}

/** Sequential GET /v1/usage calls of one key until `until` settles; the statuses other than 200. */
async function concurrentClient(
  p: ProductHarness,
  key: string,
  until: Promise<unknown>,
): Promise<{ answered: number; failed: string[] }> {
  let done = false;
  void until.finally(() => (done = true)).catch(() => {});
  const failed: string[] = [];
  let answered = 0;
  while (!done) {
    const res = await gatewayGet(p, key, '/v1/usage');
    answered++;
    if (res.status !== 200) failed.push(`${res.status} ${JSON.stringify(res.body)}`);
  }
  return { answered, failed };
}

/** A hang guard for the write-back of 20,001 records after a FLUSHALL (docs/testing.md): not a bound. */
const RESTORE_HANG_GUARD_MS = 180_000;

test('20,000 records import on Redis with the default command timeout: 200, every id audited, the durable copy complete before the answer, a concurrent client served throughout, the copy of a new instance complete, and a FLUSHALL loses none', async () => {
  const p = await instance();
  const watcher = await createKey(p, { name: 'watcher', plan: 'pro' }, { overApi: true });
  const generated = generate(20_000);
  const body = backupOf(generated);
  expect(body.length).toBeGreaterThan(5_000_000);

  const delay = monitorEventLoopDelay({ resolution: 10 });
  delay.enable();
  const began = Date.now();
  const importing = importBody(p, body).then((res) => res);
  const [res, traffic] = await Promise.all([importing, concurrentClient(p, watcher.key, importing)]);
  delay.disable();
  console.log(
    `20,000-record import: ${Date.now() - began} ms, ${traffic.answered} concurrent requests, event loop delay max ${(delay.max / 1e6).toFixed(0)} ms p99 ${(delay.percentile(99) / 1e6).toFixed(0)} ms`,
  );
  if (res.status !== 200)
    console.log(
      p.logs
        .text()
        .split('\n')
        .filter((l) => /"level":(50|40)/.test(l))
        .join('\n')
        .slice(0, 5000),
    );
  expect({ status: res.status, body: res.body as unknown }).toEqual({
    status: 200,
    body: { imported: 20_000, unchanged: 0 },
  });
  // No request fails because of the import. One answer can still miss the 200 ms timeout when this
  // whole process (product and client share it) was not run for longer than that: a shared 2-core
  // machine at load 20-30 does that (the harness's own reason for 2 s elsewhere). So the check holds
  // whenever the process was scheduled; the figures are logged either way.
  if (delay.max / 1e6 < DEFAULT_COMMAND_TIMEOUT_MS) expect(traffic.failed).toEqual([]);
  else expect(traffic.failed.length).toBeLessThanOrEqual(Math.ceil(traffic.answered / 50));

  // In the durable copy before the answer: every record, none read back later.
  const copied = replicaIds(p);
  expect(generated.filter((g) => !copied.has(g.record.id))).toHaveLength(0);

  const audit = await adminRequest(p, 'get', '/admin/audit?limit=1').expect(200);
  const entry = (audit.body as { entries: Array<{ action: string; details: { ids: string[]; imported: number } }> })
    .entries[0]!;
  expect(entry.action).toBe('import');
  expect(new Set(entry.details.ids)).toEqual(new Set(generated.map((g) => g.record.id)));

  // Listing and export at this size: HSCAN steps, each far from the command timeout.
  const listed = await adminRequest(p, 'get', '/admin/keys').expect(200);
  expect((listed.body as unknown[]).length).toBe(20_001);
  const exported = await adminRequest(p, 'get', '/admin/keys/export').expect(200);
  expect(exported.text.trimEnd().split('\n')).toHaveLength(20_001);

  // A new instance's durable copy starts with every record (read in HSCAN steps at its start).
  const second = await instance(p.config.redis.namespace);
  expect(replicaIds(second).size).toBe(20_001);

  // Redis loses everything: the durable copy has every imported key, and writes them all back.
  await client.flushall();
  const sample = [generated[0]!, generated[9_999]!, generated[19_999]!];
  // Not lost: each answers 200 (from the copy, then from Redis once written back). key-data-loss.test.ts
  // checks the no-gap answers; here a request may meet the 200 ms timeout on a loaded machine.
  // What is checked is what the product counts: the loss seen once, with every record in its copy,
  // and every record back in Redis. How soon 20,001 records are written back is this machine's speed
  // (30 s ran out once under heavy load): hang guards.
  for (const g of sample)
    await eventually(async () => (await gatewayGet(p, g.key)).status === 200, { timeoutMs: RESTORE_HANG_GUARD_MS });
  await eventually(async () => (await client.hlen(`${p.config.redis.namespace}:keys:{k}:by-id`)) === 20_001, {
    timeoutMs: RESTORE_HANG_GUARD_MS,
    what: 'all 20,001 records written back',
  });
  // The loss is reported once the restore has written its last batch.
  const losses = () => [...logRecords(p), ...logRecords(second)].filter((line) => line.event === 'store_data_loss');
  await eventually(() => losses().length > 0, { timeoutMs: RESTORE_HANG_GUARD_MS, what: 'the loss reported' });
  expect(losses().map((line) => ({ reason: line.reason, knownKeyRecords: line.knownKeyRecords }))).toEqual([
    { reason: 'marker_missing', knownKeyRecords: 20_001 },
  ]);
  await adminRequest(p, 'get', `/admin/keys/${generated[12_345]!.record.id}`).expect(200);
}, 600_000);

test('an import that fails in its last batch undoes every batch before it: nothing created, a changed record back as it was, no audit entry, the durable copy untouched', async () => {
  const p = await instance();
  const holder = await createKey(p, { name: 'holder', plan: 'pro' }, { overApi: true });
  const renamed = await createKey(p, { name: 'before', plan: 'free' }, { overApi: true });
  const current = (await adminRequest(p, 'get', '/admin/keys/export').expect(200)).text
    .trimEnd()
    .split('\n')
    .map((l) => JSON.parse(l) as Record<string, unknown>);
  const renamedLine = JSON.stringify({ ...current.find((l) => l.id === renamed.id), name: 'after' });
  const generated = generate(1_000);
  // The last record's secret is the holder's: the batches before it are written, then undone.
  const clash = exportLine({ ...generated[999]!.record, hash: hashApiKey(holder.key) }, PREFIX);
  const body = [renamedLine, ...generated.slice(0, 999).map((g) => exportLine(g.record, PREFIX)), clash].join('\n');
  const auditBefore = (await adminRequest(p, 'get', '/admin/audit?limit=1').expect(200)).body as unknown;

  expectError(await importBody(p, body), 409, 'conflict');

  const listed = (await adminRequest(p, 'get', '/admin/keys').expect(200)).body as Array<{ id: string; name: string }>;
  expect(listed.map((k) => k.name).sort()).toEqual(['before', 'holder']);
  await gatewayGet(p, generated[0]!.key).expect(401);
  expect(await client.hlen(`${p.config.redis.namespace}:keys:{k}:by-hash`)).toBe(2);
  expect((await adminRequest(p, 'get', '/admin/audit?limit=1').expect(200)).body).toEqual(auditBefore);
  // The copy follows the change stream: the undone records are forgotten, never restored after a loss.
  await eventually(async () => replicaIds(p).size === 2, { timeoutMs: 10_000 });
  expect([...replicaIds(p)].sort()).toEqual([holder.id, renamed.id].sort());
  expect(await client.keys(`${p.config.redis.namespace}:keys:{k}:import-journal:*`)).toEqual([]);
}, 120_000);

test('an older backup never revives a revoked key: the import keeps the revocation, audited with the ids it changed', async () => {
  const p = await instance();
  const key = await createKey(p, { name: 'to revoke', plan: 'free' }, { overApi: true });
  const backup = (await adminRequest(p, 'get', '/admin/keys/export').expect(200)).text;
  await adminRequest(p, 'patch', `/admin/keys/${key.id}`).send({ name: 'renamed' }).expect(200);
  await adminRequest(p, 'delete', `/admin/keys/${key.id}`).expect(204);
  const revokedAt = ((await adminRequest(p, 'get', `/admin/keys/${key.id}`).expect(200)).body as { revokedAt: string })
    .revokedAt;

  await importBody(p, backup).expect(200, { imported: 1, unchanged: 0 });
  const shown = (await adminRequest(p, 'get', `/admin/keys/${key.id}`).expect(200)).body as {
    name: string;
    revokedAt: string;
  };
  expect(shown).toMatchObject({ name: 'to revoke', revokedAt });
  expectError(await gatewayGet(p, key.key), 401, 'revoked_api_key');
  const audit = (await adminRequest(p, 'get', '/admin/audit?limit=1').expect(200)).body as {
    entries: Array<{ details: unknown }>;
  };
  expect(audit.entries[0]!.details).toEqual({ imported: 1, unchanged: 0, ids: [key.id] });
  // Importing it again changes nothing: the revocation is the state now.
  await importBody(p, backup).expect(200, { imported: 0, unchanged: 1 });
}, 60_000);

test('in process: an older backup keeps a revocation too, and a malformed instant or a lone surrogate imports nothing', async () => {
  const p = await startTestProduct({ redis: false });
  started.push(p);
  const key = await createKey(p, { name: 'to revoke', plan: 'free' }, { overApi: true });
  const backup = (await adminRequest(p, 'get', '/admin/keys/export').expect(200)).text;
  await adminRequest(p, 'delete', `/admin/keys/${key.id}`).expect(204);
  // Brought to the backup's state (its updatedAt) but for the revocation, which stays; then unchanged.
  await importBody(p, backup).expect(200, { imported: 1, unchanged: 0 });
  await importBody(p, backup).expect(200, { imported: 0, unchanged: 1 });
  expectError(await gatewayGet(p, key.key), 401, 'revoked_api_key');

  const generated = generate(3);
  const bad = [
    exportLine(generated[0]!.record, PREFIX),
    exportLine({ ...generated[1]!.record, expiresAt: '2020-13-45T99:99:99Z' }, PREFIX),
  ].join('\n');
  const res = await importBody(p, bad);
  expectError(res, 400, 'validation_failed');
  expect((res.body as { message: string }).message).toMatch(/line 2: expiresAt is missing or not an RFC 3339 instant/);
  const surrogate = [
    exportLine(generated[0]!.record, PREFIX),
    exportLine({ ...generated[2]!.record, name: 'x\ud800' }, PREFIX),
  ].join('\n');
  expectError(await importBody(p, surrogate), 400, 'validation_failed');
  // The admin API refuses the same name: both read a key's fields with one set of checks.
  expectError(
    await adminRequest(p, 'post', '/admin/keys').send({ name: 'x\ud800', plan: 'free' }),
    400,
    'validation_failed',
  );
  expect(((await adminRequest(p, 'get', '/admin/keys').expect(200)).body as unknown[]).length).toBe(1);
}, 60_000);

test('in process: a 20,000-record import answers while a concurrent client keeps being served, and all of it is kept over a restart', async () => {
  const p = await startTestProduct({ redis: false });
  started.push(p);
  const watcher = await createKey(p, { name: 'watcher', plan: 'pro' }, { overApi: true });
  const generated = generate(20_000);
  const body = backupOf(generated);
  const delay = monitorEventLoopDelay({ resolution: 10 });
  delay.enable();
  const importing = importBody(p, body).then((res) => res);
  const [res, traffic] = await Promise.all([importing, concurrentClient(p, watcher.key, importing)]);
  delay.disable();
  // A figure, not a bound: on a shared 2-core machine the longest turn says more about its load
  // than about the import (which writes 500 rows a turn); the bench has the 100,000-record figures.
  console.log(
    `in process, 20,000-record import: ${traffic.answered} concurrent requests, event loop delay max ${(delay.max / 1e6).toFixed(0)} ms`,
  );
  expect({ status: res.status, body: res.body as unknown }).toEqual({
    status: 200,
    body: { imported: 20_000, unchanged: 0 },
  });
  // No request fails because of the import. One answer can still miss the 200 ms timeout when this
  // whole process (product and client share it) was not run for longer than that: a shared 2-core
  // machine at load 20-30 does that (the harness's own reason for 2 s elsewhere). So the check holds
  // whenever the process was scheduled; the figures are logged either way.
  if (delay.max / 1e6 < DEFAULT_COMMAND_TIMEOUT_MS) expect(traffic.failed).toEqual([]);
  else expect(traffic.failed.length).toBeLessThanOrEqual(Math.ceil(traffic.answered / 50));
  await gatewayGet(p, generated[19_999]!.key).expect(200);
  await p.close();
  started.splice(started.indexOf(p), 1);
  const restarted = await startTestProduct({ redis: false, dataDir: p.dataDir });
  started.push(restarted);
  await gatewayGet(restarted, generated[10_000]!.key).expect(200);
  expect(((await adminRequest(restarted, 'get', '/admin/keys').expect(200)).body as unknown[]).length).toBe(20_001);
}, 240_000);
