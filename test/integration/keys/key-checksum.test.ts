import Redis from 'ioredis';
import { generateApiKey, generateKeyId, generateLegacyApiKey, hashApiKey } from '../../../src/keys/key-format';
import { exportLine } from '../../../src/keys/key-export';
import { IssuedKeys } from '../../../src/keys/issued/issued-keys';
import { RedisKeyStore } from '../../../src/keys/stores/redis-key-store';
import { SqliteKeyStore } from '../../../src/keys/stores/sqlite-key-store';
import { useRedisPerFile } from '../../support/redis-per-file';
import { startTestProduct, type ProductHarness } from '../../support/product-harness';
import { keyRecordFixture } from '../../support/key-record';
import { createKey } from '../../support/keys';

/**
 * CONTRACT §4, key checksum: a key of the new length whose checksum fails is refused with 401
 * invalid_api_key before any store is asked (no key-store read, no issued-key filter, no Redis
 * command of the key store), while keys issued before checksums keep working. Both stores; the
 * Redis one on a redis-server of this test's own, whose INFO commandstats counts every command.
 */

jest.setTimeout(60_000);

const MADE_UP = 200;

/** A key of the new shape whose last character is changed: its checksum fails, always (CRC32 catches any one-character change). */
function forged(prefix: string): string {
  const key = generateApiKey(prefix);
  return key.slice(0, -1) + (key.endsWith('a') ? 'b' : 'a');
}

async function get(product: ProductHarness, key: string): Promise<{ status: number; code?: string }> {
  const res = await fetch(`${product.gatewayUrl}/v1/pets`, { headers: { authorization: `Bearer ${key}` } });
  const body = (await res.json()) as { code?: string };
  return { status: res.status, code: body.code };
}

/** Calls of HGET and HMGET (a record by hash, an issued mark) the server has executed. */
async function keyStoreReads(observer: Redis): Promise<number> {
  const info = await observer.info('commandstats');
  let total = 0;
  for (const match of info.matchAll(/^cmdstat_(hget|hmget):calls=(\d+)/gm)) total += Number(match[2]);
  return total;
}

const redis = useRedisPerFile();
let observer: Redis;

beforeAll(async () => {
  observer = new Redis(redis.url, { maxRetriesPerRequest: 1 });
});

afterAll(async () => {
  observer?.disconnect();
});

afterEach(() => {
  jest.restoreAllMocks();
});

describe.each([
  ['Redis', true],
  ['in process (SQLite)', false],
])('key checksum on %s', (_label, onRedis) => {
  let product: ProductHarness;

  beforeAll(async () => {
    product = await startTestProduct({
      ...(onRedis ? { redisUrl: redis.url } : { redis: false }),
      overrides: { anonymous: { perMinute: 10_000 } },
    });
    // Keys exist, so the issued-key filter (on Redis) has something in it.
    for (let i = 0; i < 3; i++) await createKey(product, { plan: 'pro' });
  });

  afterAll(async () => {
    await product?.close();
  });

  test(`${MADE_UP} made-up keys with a failing checksum: 401 invalid_api_key, no key-store read, no filter asked`, async () => {
    const redisFindByHash = jest.spyOn(RedisKeyStore.prototype, 'findByHash');
    const sqliteFindByHash = jest.spyOn(SqliteKeyStore.prototype, 'findByHash');
    const filterAsked = jest.spyOn(IssuedKeys.prototype, 'neverIssued');
    const readsBefore = onRedis ? await keyStoreReads(observer) : 0;
    const prefix = product.config.keys.prefix;
    // One at a time: concurrent misses would share one read, and hide what each costs.
    const answers: Array<{ status: number; code?: string }> = [];
    for (let i = 0; i < MADE_UP; i++) answers.push(await get(product, forged(prefix)));

    expect(answers.filter((a) => a.status !== 401 || a.code !== 'invalid_api_key')).toEqual([]);
    expect({
      redisFindByHash: redisFindByHash.mock.calls.length,
      sqliteFindByHash: sqliteFindByHash.mock.calls.length,
      filterAsked: filterAsked.mock.calls.length,
    }).toEqual({
      redisFindByHash: 0,
      sqliteFindByHash: 0,
      filterAsked: 0,
    });
    if (onRedis) {
      // Before checksums each made-up key cost an issued-mark read (HMGET): 200 here. What is left
      // is the instance's own background (the key-store loss check), a few in these seconds.
      expect((await keyStoreReads(observer)) - readsBefore).toBeLessThan(MADE_UP / 20);
    }
  });

  test('a key with a good checksum that was never issued is still looked up, and refused the same way', async () => {
    const findByHash = jest.spyOn(onRedis ? RedisKeyStore.prototype : SqliteKeyStore.prototype, 'findByHash');
    const filterAsked = jest.spyOn(IssuedKeys.prototype, 'neverIssued');
    expect(await get(product, generateApiKey(product.config.keys.prefix))).toEqual({
      status: 401,
      code: 'invalid_api_key',
    });
    // On Redis the filter answers it; in process the store does.
    expect(onRedis ? filterAsked.mock.calls.length : findByHash.mock.calls.length).toBe(1);
  });

  test('a key issued before checksums (32 characters, imported by its hash) keeps working; a new key carries its checksum', async () => {
    const prefix = product.config.keys.prefix;
    const legacy = generateLegacyApiKey(prefix);
    const record = keyRecordFixture({
      id: generateKeyId(),
      name: 'issued before checksums',
      plan: 'pro',
      hash: hashApiKey(legacy),
    });
    const imported = await fetch(`${product.adminUrl}/admin/keys/import`, {
      method: 'POST',
      headers: { authorization: `Bearer ${product.adminToken}`, 'content-type': 'application/x-ndjson' },
      body: exportLine(record, prefix) + '\n',
    });
    expect(imported.status).toBe(200);
    expect(await get(product, legacy)).toEqual({ status: 200, code: undefined });

    const { key } = await createKey(product, { plan: 'pro' }, { overApi: true });
    expect(key.slice(prefix.length)).toMatch(/^[0-9A-Za-z]{38}$/);
    expect(await get(product, key)).toEqual({ status: 200, code: undefined });
  });
});
