import { createHash, randomBytes } from 'node:crypto';
import { connectRedis, type RedisClient } from '../../../src/shared/redis/redis';
import { systemClock } from '../../../src/shared/clock';
import { KeyService } from '../../../src/keys/key-service';
import { RedisKeyStore, redisKeyLayout } from '../../../src/keys/stores/redis-key-store';
import { IssuedKeys, type IssuedHashSource } from '../../../src/keys/issued/issued-keys';
import type { KeyChange } from '../../../src/keys/types';
import { testRedisUrl, uniqueNamespace } from '../../support/test-redis';
import { eventually } from '../../support/eventually';

/**
 * The issued-key filter (CONTRACT §4, a flood of never-issued keys) on a real Redis: two instances,
 * each its own connections and store, on one namespace.
 */

const PREFIX = 'asg_live_';
const plans = { free: { perMinute: 60, perDay: 1000 }, pro: { perMinute: 300, perDay: 10000 }, enterprise: {} };
const settings = () => ({ url: testRedisUrl(), clusterNodes: [], commandTimeoutMs: 2000 });
const randomHash = () => createHash('sha256').update(randomBytes(16)).digest('hex');

/** The store as IssuedKeys sees it, with the change stream delayed by `delayMs` (a slow subscriber). */
class DelayedSource implements IssuedHashSource {
  delayMs = 0;
  constructor(private readonly store: RedisKeyStore) {}
  issuedMark() {
    return this.store.issuedMark();
  }
  scanIssuedHashes(onBatch: (hashes: string[]) => void) {
    return this.store.scanIssuedHashes(onBatch);
  }
  onResync(listener: () => void) {
    return this.store.onResync(listener);
  }
  onChange(listener: (change: KeyChange) => void) {
    return this.store.onChange((change) => {
      if (this.delayMs === 0) listener(change);
      else setTimeout(() => listener(change), this.delayMs).unref();
    });
  }
}

describe('IssuedKeys on Redis', () => {
  const namespace = uniqueNamespace('issued');
  let redisA: RedisClient;
  let redisB: RedisClient;
  let storeA: RedisKeyStore;
  let storeB: RedisKeyStore;
  let serviceA: KeyService;
  let sourceB: DelayedSource;
  let issuedB: IssuedKeys;
  const rebuilds: number[] = [];

  beforeAll(async () => {
    redisA = await connectRedis(settings());
    redisB = await connectRedis(settings());
    storeA = await RedisKeyStore.open(redisA, { namespace });
    storeB = await RedisKeyStore.open(redisB, { namespace });
    serviceA = new KeyService({ store: storeA, prefix: PREFIX, plans: () => plans, clock: systemClock });
  });

  beforeEach(async () => {
    sourceB = new DelayedSource(storeB);
    issuedB = new IssuedKeys(sourceB, {
      checkIntervalMs: 20,
      catchUpTimeoutMs: 300,
      onRebuilt: (hashes) => rebuilds.push(hashes),
    });
    await issuedB.ready();
  });

  afterEach(() => issuedB.close());

  afterAll(async () => {
    await storeA.close();
    await storeB.close();
    redisA.disconnect();
    redisB.disconnect();
  });

  it('is built from every hash in Redis: active, revoked, and a rotated key’s previous secret', async () => {
    const active = await serviceA.create({ name: 'active', plan: 'free' });
    const revoked = await serviceA.create({ name: 'revoked', plan: 'free' });
    await serviceA.revoke(revoked.record.id);
    const rotated = await serviceA.create({ name: 'rotated', plan: 'free' });
    await serviceA.rotate(rotated.record.id, 60);
    issuedB.close();
    issuedB = new IssuedKeys(sourceB, { checkIntervalMs: 20 });
    await issuedB.ready();
    expect(issuedB.current).toBe(true);
    for (const hash of [active.record.hash, revoked.record.hash, rotated.record.hash])
      expect(await issuedB.neverIssued(hash)).toBe(false);
    const after = await storeA.get(rotated.record.id);
    expect(await issuedB.neverIssued(after!.hash)).toBe(false);
    expect(await issuedB.neverIssued(randomHash())).toBe(true);
  });

  it('decides a thousand made-up hashes with a handful of Redis commands', async () => {
    const sent = jest.spyOn(redisB, 'sendCommand');
    try {
      const answers = await Promise.all(Array.from({ length: 1000 }, () => issuedB.neverIssued(randomHash())));
      // 0.1 % false positives at most would say false; the filter is nowhere near full.
      expect(answers.filter(Boolean).length).toBeGreaterThan(990);
      expect(sent.mock.calls.length).toBeLessThanOrEqual(2); // one shared mark read (EVAL once if not cached)
    } finally {
      sent.mockRestore();
    }
  });

  it('never refuses a key created on the other instance, even before its change arrives', async () => {
    sourceB.delayMs = 150;
    const created = await serviceA.create({ name: 'fresh', plan: 'free' });
    // The change is still on its way: the mark read after this call counts the creation, so B waits for it.
    expect(issuedB.stats.hashes).toBeGreaterThan(0);
    expect(await issuedB.neverIssued(created.record.hash)).toBe(false);
  });

  it('asks the store, and reads everything again, when the change never arrives', async () => {
    sourceB.delayMs = 10_000;
    const created = await serviceA.create({ name: 'lost', plan: 'free' });
    const before = rebuilds.length;
    expect(await issuedB.neverIssued(created.record.hash)).toBe(false);
    sourceB.delayMs = 0;
    await eventually(() => rebuilds.length > before && issuedB.current, { what: 'rebuilt' });
    // The rebuild read the created hash from Redis.
    expect(await issuedB.neverIssued(created.record.hash)).toBe(false);
    expect(await issuedB.neverIssued(randomHash())).toBe(true);
  });

  it('rebuilds on a gap in the change stream, deciding nothing locally meanwhile', async () => {
    const { epoch, seq } = await storeA.issuedMark();
    const before = rebuilds.length;
    await redisA.publish(
      redisKeyLayout(namespace).channel,
      JSON.stringify({ id: 'key_x', hash: randomHash(), epoch, seq: seq + 5 }),
    );
    await eventually(() => rebuilds.length > before && issuedB.current, { what: 'rebuild after the gap' });
  });

  it('starts over when the mark in Redis is gone (its data lost): a new epoch', async () => {
    const created = await serviceA.create({ name: 'before loss', plan: 'free' });
    await redisA.del(redisKeyLayout(namespace).issued);
    const before = rebuilds.length;
    // The mark read finds another epoch: this one goes to the store, and the filter is read again.
    expect(await issuedB.neverIssued(randomHash())).toBe(false);
    await eventually(() => rebuilds.length > before && issuedB.current, { what: 'rebuilt on the new epoch' });
    expect(await issuedB.neverIssued(created.record.hash)).toBe(false);
    expect(await issuedB.neverIssued(randomHash())).toBe(true);
  });
});
