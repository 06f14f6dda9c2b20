import Redis from 'ioredis';
import request from 'supertest';
import { loadConfig } from '../../../src/shared/config';
import { startTestProduct, type ProductHarness } from '../../support/product-harness';
import { testRedisUrl } from '../../support/test-redis';
import { adminRequest, gatewayGet } from '../admin/admin-kit';
import { expectError } from '../../support/errors';
import { createKey, type CreatedKeyBody } from '../../support/keys';

/**
 * Production and staging on ONE Redis, each with the namespace and key prefix its config file
 * gives it (config/production.yaml, config/staging.yaml): keys of one are refused by the other, and
 * no key record or counter of one lands in the other's namespace.
 */

const stagingEnv = {
  APP_ENV: 'staging',
  ADMIN_TOKEN: 'staging-admin-token-0123456789abcdefghijkl',
  SIGNING_SECRET: 'staging-signing-secret-0123456789abcdefghij',
};
const productionEnv = {
  APP_ENV: 'production',
  ADMIN_TOKEN: 'production-admin-token-0123456789abcdefghij',
  SIGNING_SECRET: 'production-signing-secret-0123456789abcdefgh',
};

/** The namespace each environment's own config files give it, not one the harness makes up. */
const stagingNamespace = loadConfig({ env: stagingEnv }).redis.namespace;
const productionNamespace = loadConfig({ env: productionEnv }).redis.namespace;

let staging: ProductHarness;
let production: ProductHarness;
let redis: Redis;
let stagingKey: CreatedKeyBody;
let productionKey: CreatedKeyBody;

beforeAll(async () => {
  staging = await startTestProduct({ env: stagingEnv, namespace: stagingNamespace });
  production = await startTestProduct({ env: productionEnv, namespace: productionNamespace });
  redis = new Redis(testRedisUrl());
  stagingKey = await createKey(staging, { name: 'staging client', plan: 'free' }, { overApi: true });
  productionKey = await createKey(production, { name: 'production client', plan: 'free' }, { overApi: true });
});

afterAll(async () => {
  await staging?.close();
  await production?.close();
  redis?.disconnect();
});

/** Every Redis key under `namespace:`. */
async function keysUnder(namespace: string): Promise<string[]> {
  const found: string[] = [];
  let cursor = '0';
  do {
    const [next, batch] = await redis.scan(cursor, 'MATCH', `${namespace}:*`, 'COUNT', 1000);
    cursor = next;
    found.push(...batch);
  } while (cursor !== '0');
  return found;
}

test('the config files give the two environments distinct namespaces, neither inside the other', () => {
  expect(stagingNamespace).toBe('asg:staging');
  expect(productionNamespace).toBe('asg:prod');
  expect(`${stagingNamespace}:`.startsWith(`${productionNamespace}:`)).toBe(false);
  expect(`${productionNamespace}:`.startsWith(`${stagingNamespace}:`)).toBe(false);
  expect(staging.config.redis.url).toBe(production.config.redis.url);
});

test('staging keys start asg_test_, production keys asg_live_', () => {
  expect(stagingKey.key).toMatch(/^asg_test_[0-9A-Za-z]{22,}$/);
  expect(productionKey.key).toMatch(/^asg_live_[0-9A-Za-z]{22,}$/);
});

test("each gateway serves its own keys and refuses the other's with 401 invalid_api_key", async () => {
  await gatewayGet(staging, stagingKey.key).expect(200);
  await gatewayGet(production, productionKey.key).expect(200);
  expectError(await gatewayGet(staging, productionKey.key), 401, 'invalid_api_key');
  expectError(await gatewayGet(production, stagingKey.key), 401, 'invalid_api_key');
});

test('each admin API knows only its own keys and its own token', async () => {
  const stagingIds = (
    (await adminRequest(staging, 'get', '/admin/keys').expect(200)).body as Array<{ id: string }>
  ).map((k) => k.id);
  const productionIds = (
    (await adminRequest(production, 'get', '/admin/keys').expect(200)).body as Array<{ id: string }>
  ).map((k) => k.id);
  expect(stagingIds).toContain(stagingKey.id);
  expect(stagingIds).not.toContain(productionKey.id);
  expect(productionIds).toContain(productionKey.id);
  expect(productionIds).not.toContain(stagingKey.id);
  expectError(await adminRequest(staging, 'get', `/admin/keys/${productionKey.id}`), 404, 'not_found');
  expectError(
    await request(production.adminUrl).get('/admin/keys').set('Authorization', `Bearer ${staging.adminToken}`),
    401,
    'invalid_api_key',
  );
});

test('key records and counters of each environment live only under its own namespace', async () => {
  // Traffic on both, so both have counters.
  await gatewayGet(staging, stagingKey.key).expect(200);
  await gatewayGet(production, productionKey.key).expect(200);

  const stagingRedisKeys = await keysUnder(stagingNamespace);
  const productionRedisKeys = await keysUnder(productionNamespace);
  expect(stagingRedisKeys.filter((k) => k.includes(stagingKey.id)).length).toBeGreaterThan(0);
  expect(productionRedisKeys.filter((k) => k.includes(productionKey.id)).length).toBeGreaterThan(0);
  expect(stagingRedisKeys.filter((k) => k.includes(productionKey.id))).toEqual([]);
  expect(productionRedisKeys.filter((k) => k.includes(stagingKey.id))).toEqual([]);
  expect(stagingRedisKeys.filter((k) => productionRedisKeys.includes(k))).toEqual([]);

  // The record of each key (inside its namespace's key hashes) is found only on its own side.
  const holdsRecordOf = async (redisKeys: string[], keyId: string) => {
    for (const key of redisKeys) {
      if ((await redis.type(key)) !== 'hash') continue;
      if ((await redis.hexists(key, keyId)) === 1) return true;
      if ((await redis.hvals(key)).some((value) => value.includes(keyId))) return true;
    }
    return false;
  };
  expect(await holdsRecordOf(stagingRedisKeys, stagingKey.id)).toBe(true);
  expect(await holdsRecordOf(productionRedisKeys, productionKey.id)).toBe(true);
  expect(await holdsRecordOf(stagingRedisKeys, productionKey.id)).toBe(false);
  expect(await holdsRecordOf(productionRedisKeys, stagingKey.id)).toBe(false);

  // Counters are per namespace: spending production's key leaves staging's count where it was.
  const stagingBefore = (await adminRequest(staging, 'get', `/admin/keys/${stagingKey.id}`).expect(200)).body as {
    usage: { day: { remaining: number } };
  };
  await gatewayGet(production, productionKey.key).expect(200);
  const stagingAfter = (await adminRequest(staging, 'get', `/admin/keys/${stagingKey.id}`).expect(200)).body as {
    usage: { day: { remaining: number } };
  };
  expect(stagingAfter.usage.day.remaining).toBe(stagingBefore.usage.day.remaining);
});
