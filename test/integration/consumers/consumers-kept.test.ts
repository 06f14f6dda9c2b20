import { connectRedis, type RedisClient } from '../../../src/shared/redis/redis';
import { redisConsumerLayout } from '../../../src/consumers/redis-consumer-store';
import { useRedisPerFile } from '../../support/redis-per-file';
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
const redis = useRedisPerFile();
let client: RedisClient;
let a: ProductHarness;
let b: ProductHarness;
const namespace = uniqueNamespace('consumers-kept');

beforeAll(async () => {
  client = await connectRedis({ url: redis.url, clusterNodes: [], commandTimeoutMs: 5000 } as never);
  const overrides = { redis: { url: redis.url }, keys: { lossCheckSeconds: 1 } };
  a = await startTestProduct({ namespace, overrides });
  b = await startTestProduct({ namespace: uniqueNamespace('consumers-import'), overrides });
}, 30_000);

afterAll(async () => {
  await Promise.all([a?.close(), b?.close()]);
  client?.disconnect();
});

it('a consumer survives a Redis that lost its data: back in Redis, its limits enforced again', async () => {
  const consumer = await adminRequest(a, 'post', '/admin/consumers').send({
    name: 'Survivor',
    limits: { perMinute: 2 },
  });
  const key = await adminRequest(a, 'post', '/admin/keys').send({
    name: 'k',
    plan: 'pro',
    consumerId: consumer.body.id,
  });
  await client.flushall();
  await eventually(async () => (await client.hexists(redisConsumerLayout(namespace).byId, consumer.body.id)) === 1, {
    timeoutMs: 10_000,
  });
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
  const consumer = await adminRequest(a, 'post', '/admin/consumers').send({
    name: 'Exported',
    limits: { perDay: 40 },
    billingDay: 12,
  });
  const key = await adminRequest(a, 'post', '/admin/keys').send({
    name: 'exported key',
    plan: 'pro',
    consumerId: consumer.body.id,
  });
  const exported = await adminRequest(a, 'get', '/admin/keys/export');
  expect(exported.status).toBe(200);
  const lines = exported.text
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Record<string, unknown>);
  expect(lines).toEqual(
    expect.arrayContaining([
      expect.objectContaining({
        kind: 'consumer',
        id: consumer.body.id,
        name: 'Exported',
        limits: { perDay: 40 },
        billingDay: 12,
      }),
    ]),
  );
  expect(lines).toEqual(
    expect.arrayContaining([expect.objectContaining({ id: key.body.id, consumerId: consumer.body.id })]),
  );

  const imported = await adminRequest(b, 'post', '/admin/keys/import')
    .set('Content-Type', 'application/x-ndjson')
    .send(exported.text);
  expect(imported.status).toBe(200);
  expect(imported.body.imported).toBe(lines.length);
  const again = await adminRequest(b, 'post', '/admin/keys/import')
    .set('Content-Type', 'application/x-ndjson')
    .send(exported.text);
  expect(again.body).toEqual({ imported: 0, unchanged: lines.length });
  expect((await adminRequest(b, 'get', `/admin/consumers/${consumer.body.id}`)).body).toMatchObject({
    name: 'Exported',
    keyIds: [key.body.id],
  });
  await eventually(
    async () => (await gatewayGet(b, key.body.key, '/v1/usage')).body.consumer?.id === consumer.body.id,
    { timeoutMs: 2000 },
  );
});

it('an import naming an unknown consumer, or whose keys are refused, imports nothing', async () => {
  const before = (await adminRequest(b, 'get', '/admin/consumers')).body.length;
  const own = await adminRequest(b, 'post', '/admin/keys').send({ name: 'holder', plan: 'free' });
  const ownLine = (await adminRequest(b, 'get', '/admin/keys/export')).text
    .split('\n')
    .find((l) => l.includes(own.body.id))!;
  const consumerLine = JSON.stringify({
    v: 1,
    kind: 'consumer',
    id: 'con_' + 'a'.repeat(24),
    name: 'New',
    limits: {},
    billingDay: 1,
    allowedOperations: null,
    allowedAddresses: null,
    createdAt: '2026-01-01T00:00:00.000Z',
    updatedAt: '2026-01-01T00:00:00.000Z',
  });
  const orphan = JSON.stringify({
    ...JSON.parse(ownLine),
    id: 'key_' + 'b'.repeat(24),
    hash: 'c'.repeat(64),
    consumerId: 'con_' + 'd'.repeat(24),
  });
  const refused = await adminRequest(b, 'post', '/admin/keys/import')
    .set('Content-Type', 'application/x-ndjson')
    .send(consumerLine + '\n' + orphan + '\n');
  expectError(refused, 400, 'validation_failed');
  expect(refused.body.message).toContain('line 2');
  // The same secret under another id: the keys are refused (409) and the consumer written first is taken back.
  const stolen = JSON.stringify({ ...JSON.parse(ownLine), id: 'key_' + 'e'.repeat(24) });
  expectError(
    await adminRequest(b, 'post', '/admin/keys/import')
      .set('Content-Type', 'application/x-ndjson')
      .send(consumerLine + '\n' + stolen + '\n'),
    409,
    'conflict',
  );
  expect((await adminRequest(b, 'get', '/admin/consumers')).body.length).toBe(before);
});

/**
 * Each line of an import is checked as the admin API checks what it holds (CONTRACT §4): a consumer
 * line as POST /admin/consumers checks a consumer, a key line as the key routes check a key. Every
 * refusal names its line, and nothing of the file is imported. On Redis and in process alike.
 */
describe.each([
  ['on Redis', { redis: true }],
  ['in process (SQLite)', { redis: false }],
] as const)('bad lines of an import, %s', (_store, { redis: onRedis }) => {
  let target: ProductHarness;
  const at = '2026-01-01T00:00:00.000Z';
  const goodConsumer = {
    v: 1,
    kind: 'consumer',
    id: 'con_' + '1'.repeat(24),
    name: 'Good',
    limits: { perMinute: 10 },
    billingDay: 1,
    allowedOperations: null,
    allowedAddresses: null,
    createdAt: at,
    updatedAt: at,
  };
  const goodKey = {
    v: 1,
    prefix: 'asg_dev_',
    id: 'key_' + '2'.repeat(24),
    name: 'good key',
    plan: 'free',
    limits: null,
    hash: '3'.repeat(64),
    previousHash: null,
    previousKeyExpiresAt: null,
    createdAt: at,
    updatedAt: at,
    revokedAt: null,
    expiresAt: null,
    consumerId: goodConsumer.id,
  };
  const consumer = (fields: object) => ({ ...goodConsumer, id: 'con_' + '4'.repeat(24), ...fields });
  const key = (fields: object) => ({ ...goodKey, id: 'key_' + '5'.repeat(24), hash: '6'.repeat(64), ...fields });
  const importLines = (lines: object[]) =>
    adminRequest(target, 'post', '/admin/keys/import')
      .set('Content-Type', 'application/x-ndjson')
      .send(lines.map((l) => JSON.stringify(l)).join('\n') + '\n');
  const exported = async () =>
    (await adminRequest(target, 'get', '/admin/keys/export').expect(200)).text.trimEnd().split('\n').sort();

  beforeAll(async () => {
    // A cost of 4: a limit of 3 could never serve that request.
    const overrides = {
      costs: [{ method: 'POST', path: '/pets', cost: 4 }],
      ...(onRedis ? { redis: { url: redis.url } } : {}),
    };
    target = await startTestProduct({ redis: onRedis, overrides });
    await adminRequest(target, 'post', '/admin/consumers').send({ name: 'Already here' }).expect(201);
  }, 30_000);
  afterAll(() => target?.close());

  it.each([
    [
      'a consumer name of 300 characters',
      consumer({ name: 'x'.repeat(300) }),
      /line 2: consumer: name must be 1 to 200 characters/,
    ],
    [
      'a consumer name of control characters that trims to nothing',
      consumer({ name: '\t\r\n\u000b' }),
      /line 2: consumer: name must be 1 to 200 characters/,
    ],
    [
      'a consumer name with a lone surrogate',
      consumer({ name: 'half \ud800 a pair' }),
      /line 2: consumer: name must be text \(it holds a lone surrogate\)/,
    ],
    [
      'an address that is not one',
      consumer({ allowedAddresses: ['not-an-ip'] }),
      /line 2: consumer: allowedAddresses: "not-an-ip" is not an IPv4\/IPv6 address or CIDR range/,
    ],
    [
      'an unknown operation id',
      consumer({ allowedOperations: ['dropTables'] }),
      /line 2: consumer: allowedOperations: unknown operation id "dropTables"/,
    ],
    [
      'an operation id with a control character',
      consumer({ allowedOperations: ['listPets\u0000'] }),
      /line 2: consumer: allowedOperations: unknown operation id "listPets\\u0000"/,
    ],
    [
      'consumer limits below the largest cost',
      consumer({ limits: { perMinute: 3 } }),
      /line 2: consumer: limits below the largest operation cost 4 \(config costs\) could never serve it: perMinute/,
    ],
    ['a consumer limit of zero', consumer({ limits: { perDay: 0 } }), /line 2: consumer: limits\.perDay: Too small/],
    [
      'consumer limits with an unknown window',
      consumer({ limits: { perHour: 10 } }),
      /line 2: consumer: limits: Unrecognized key: "perHour"/,
    ],
    [
      'a consumer instant that does not exist',
      consumer({ createdAt: '2026-02-31T00:00:00Z' }),
      /line 2: consumer: createdAt must be an RFC 3339 instant/,
    ],
    [
      'a consumer instant in the future',
      consumer({ updatedAt: '2099-01-01T00:00:00.000Z' }),
      /line 2: consumer: updatedAt 2099-01-01T00:00:00.000Z is in the future/,
    ],
    ['an unknown consumer field', consumer({ plan: 'pro' }), /line 2: consumer: Unrecognized key: "plan"/],
    ['a consumer billing day of 31', consumer({ billingDay: 31 }), /line 2: consumer: billingDay: Too big/],
    [
      'a key whose previous secret ends years ahead',
      key({ previousHash: '7'.repeat(64), previousKeyExpiresAt: '2036-01-01T00:00:00Z' }),
      /line 3: previousKeyExpiresAt 2036-01-01T00:00:00Z is more than the longest rotation grace \(604800 s\) ahead/,
    ],
    ['an unknown key field', key({ role: 'admin' }), /line 3: unknown field "role": not one an export writes/],
    [
      'a key created in the future',
      key({ createdAt: '2099-01-01T00:00:00.000Z' }),
      /line 3: createdAt 2099-01-01T00:00:00.000Z is in the future/,
    ],
    [
      'a key revoked in the future',
      key({ revokedAt: '2099-01-01T00:00:00.000Z' }),
      /line 3: revokedAt 2099-01-01T00:00:00.000Z is in the future/,
    ],
    [
      'an active key naming a consumer neither here nor in the file',
      key({ consumerId: 'con_' + '8'.repeat(24) }),
      /line 3: consumerId con_8{24} is neither a consumer here nor one in the file/,
    ],
  ])('%s: 400 naming its line, nothing imported', async (_what, bad, message) => {
    const before = await exported();
    // As the export writes them: a consumer line among the consumers (line 2), a key line among the keys (line 3).
    const res = await importLines('kind' in bad ? [goodConsumer, bad, goodKey] : [goodConsumer, goodKey, bad]);
    expectError(res, 400, 'validation_failed');
    expect(res.body.message).toMatch(message);
    expect(await exported()).toEqual(before);
  });

  it("a key line before its consumer's line imports (consumer lines are taken anywhere in the file), and so does a revoked key whose consumer was deleted", async () => {
    const revoked = key({ name: 'revoked, consumer deleted', revokedAt: at, consumerId: 'con_' + '9'.repeat(24) });
    const res = await importLines([goodKey, revoked, goodConsumer]);
    expect({ status: res.status, body: res.body }).toEqual({ status: 200, body: { imported: 3, unchanged: 0 } });
    expect((await adminRequest(target, 'get', `/admin/consumers/${goodConsumer.id}`).expect(200)).body).toMatchObject({
      name: 'Good',
      keyIds: [goodKey.id],
    });
    // The revoked key is kept as exported: revoked, naming the consumer it had.
    expect((await adminRequest(target, 'get', `/admin/keys/${revoked.id}`).expect(200)).body).toMatchObject({
      revokedAt: at,
      consumerId: revoked.consumerId,
    });
    expect(await importLines([goodKey, revoked, goodConsumer])).toMatchObject({
      status: 200,
      body: { imported: 0, unchanged: 3 },
    });
  });
});

it('the admin API refuses a consumer name with a lone surrogate, as it does for a key', async () => {
  expectError(
    await adminRequest(a, 'post', '/admin/consumers').send({ name: 'half \ud800 a pair' }),
    400,
    'validation_failed',
  );
  const made = await adminRequest(a, 'post', '/admin/consumers').send({ name: 'whole \ud83d\ude00 pair' }).expect(201);
  const res = await adminRequest(a, 'patch', `/admin/consumers/${made.body.id}`).send({ name: '\udc00' });
  expectError(res, 400, 'validation_failed');
  expect(res.body.message).toBe('name must be text (it holds a lone surrogate).');
  expect((await adminRequest(a, 'get', `/admin/consumers/${made.body.id}`)).body.name).toBe('whole \ud83d\ude00 pair');
});
