import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { connectRedis, type RedisClient } from '../../../src/shared/redis/redis';
import { ManualClock, systemClock } from '../../../src/shared/clock';
import { KeyResolver } from '../../../src/keys/key-resolver';
import { KeyService } from '../../../src/keys/key-service';
import { RedisKeyStore } from '../../../src/keys/stores/redis-key-store';
import { createKeyDurabilityMetrics } from '../../../src/keys';
import { startStores } from '../../../src/product/stores';
import { createGatewayMetrics } from '../../../src/shared/metrics/metrics';
import { Registry } from 'prom-client';
import { Closers } from '../../../src/product/closers';
import { loadConfig } from '../../../src/shared/config';
import { createLogger } from '../../../src/shared/logger';
import { SqliteKeyStore } from '../../../src/keys/stores/sqlite-key-store';
import { testRedisUrl, uniqueNamespace } from '../../support/test-redis';
import { generateApiKey, generateKeyId, hashApiKey } from '../../../src/keys/key-format';
import type { KeyChange } from '../../../src/keys/types';
import { CountingKeyStore } from '../../unit/keys/counting-key-store';
import { eventually } from '../../support/eventually';

const PREFIX = 'asg_live_';
const plans = { free: { perMinute: 60, perDay: 1000 }, pro: { perMinute: 300, perDay: 10000 }, enterprise: {} };
const settings = () => ({ url: testRedisUrl(), clusterNodes: [], commandTimeoutMs: 2000 });

/** Two gateway instances: each its own Redis connections, store and resolver, on one namespace. */
describe('key changes across instances', () => {
  const namespace = uniqueNamespace('changes');
  // The resolvers' clock never moves: only a change notification can refresh their caches.
  const frozenClock = new ManualClock();
  let redisA: RedisClient;
  let redisB: RedisClient;
  let storeA: RedisKeyStore;
  let storeB: CountingKeyStore;
  let serviceA: KeyService;
  let resolverA: KeyResolver;
  let resolverB: KeyResolver;
  const seenByB: KeyChange[] = [];

  beforeAll(async () => {
    redisA = await connectRedis(settings());
    redisB = await connectRedis(settings());
    storeA = await RedisKeyStore.open(redisA, { namespace });
    storeB = new CountingKeyStore(await RedisKeyStore.open(redisB, { namespace }));
    storeB.onChange((change) => seenByB.push(change));
    serviceA = new KeyService({ store: storeA, prefix: PREFIX, plans: () => plans, clock: systemClock });
    const options = { prefix: PREFIX, cacheTtlSeconds: 60, negativeCacheTtlSeconds: 5, maxEntries: 1000 };
    resolverA = new KeyResolver(storeA, frozenClock, options);
    resolverB = new KeyResolver(storeB, frozenClock, options);
  });

  afterAll(async () => {
    resolverA.close();
    resolverB.close();
    await storeA.close();
    await storeB.close();
    await redisA.quit();
    await redisB.quit();
  });

  it('a revocation on instance A reaches instance B’s cache within 1 s', async () => {
    const { key, record } = await serviceA.create({ name: 'shop', plan: 'free' });
    // Let the insert's own notification reach B first, so it cannot be what refreshes B below.
    await eventually(async () => seenByB.some((c) => c.id === record.id), { timeoutMs: 1000 });
    expect((await resolverB.resolve(key)).status).toBe('valid');
    expect((await resolverB.resolve(key)).status).toBe('valid');
    const callsWhileCached = storeB.findByHashCalls;
    expect(callsWhileCached).toBe(1); // the second resolve was a cache hit

    await serviceA.revoke(record.id);
    const took = await eventually(async () => (await resolverB.resolve(key)).status === 'revoked', { timeoutMs: 1000 });
    expect(took).toBeLessThan(1000);
    expect((await resolverA.resolve(key)).status).toBe('revoked');
  });

  it('a plan change on instance A reaches instance B within 1 s', async () => {
    const { key, record } = await serviceA.create({ name: 'upgrade', plan: 'free' });
    const before = await resolverB.resolve(key);
    expect(before.status === 'valid' && before.record.plan).toBe('free');

    await serviceA.update(record.id, { plan: 'pro' });
    await eventually(
      async () => {
        const now = await resolverB.resolve(key);
        return now.status === 'valid' && now.record.plan === 'pro';
      },
      { timeoutMs: 1000 },
    );
    const after = await resolverB.resolve(key);
    expect(after.status === 'valid' && serviceA.effectiveLimits(after.record)).toEqual({
      perMinute: 300,
      perDay: 10000,
    });
  });

  it('a key inserted on A after B remembered it as unknown is accepted by B within 1 s', async () => {
    const key = generateApiKey(PREFIX);
    expect(await resolverB.resolve(key)).toEqual({ status: 'invalid' });
    const calls = storeB.findByHashCalls;
    expect(await resolverB.resolve(key)).toEqual({ status: 'invalid' });
    expect(storeB.findByHashCalls).toBe(calls); // remembered as unknown, and the clock never moves

    const now = new Date().toISOString();
    await storeA.insert({
      id: generateKeyId(),
      name: 'late',
      plan: 'free',
      limits: null,
      hash: hashApiKey(key),
      createdAt: now,
      updatedAt: now,
      revokedAt: null,
      expiresAt: null,
      previousHash: null,
      previousKeyExpiresAt: null,
    });
    await eventually(async () => (await resolverB.resolve(key)).status === 'valid', { timeoutMs: 1000 });
    expect(storeB.findByHashCalls).toBeGreaterThan(calls);
  });
});

describe('startStores, the one place that chooses the store', () => {
  const startOptions = () => ({
    logger: createLogger('silent'),
    clock: systemClock,
    closers: new Closers(),
    keyDurability: createKeyDurabilityMetrics(),
    metrics: createGatewayMetrics(new Registry(), { activeBans: async () => 0, deprecations: () => [] }),
    limiterEvents: {},
  });

  it('opens every store on Redis when Redis is configured', async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'asg-stores-redis-'));
    const options = startOptions();
    const config = loadConfig({
      env: { REDIS_URL: testRedisUrl() },
      overrides: { dataDir, redis: { namespace: uniqueNamespace('factory') } },
    });
    try {
      const stores = await startStores(config, options);
      expect(stores.redis).not.toBeNull();
      expect(stores.limiters.health).not.toBeNull();
      await expect(stores.ping()).resolves.toBeUndefined();
      expect(fs.existsSync(path.join(dataDir, 'keys.sqlite'))).toBe(false);
    } finally {
      await options.closers.closeAll();
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it('keeps keys, usage and the audit trail in SQLite under dataDir without Redis', async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'asg-stores-local-'));
    const options = startOptions();
    try {
      const stores = await startStores(loadConfig({ env: {}, overrides: { dataDir } }), options);
      expect(stores.redis).toBeNull();
      expect(stores.keyStore).toBeInstanceOf(SqliteKeyStore);
      expect(stores.limiters.health).toBeNull();
      expect(fs.existsSync(path.join(dataDir, 'keys.sqlite'))).toBe(true);
    } finally {
      await options.closers.closeAll();
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
