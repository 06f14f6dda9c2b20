import { ManualClock } from '../../../src/shared/clock';
import { generateApiKey, generateKeyId, generateLegacyApiKey, hashApiKey } from '../../../src/keys/key-format';
import { KeyResolver, type KeyResolverOptions } from '../../../src/keys/key-resolver';
import { SqliteKeyStore } from '../../../src/keys/stores/sqlite-key-store';
import type { ApiKeyRecord } from '../../../src/keys/types';
import { CountingKeyStore } from './counting-key-store';
import { keyRecordFixture } from '../../support/key-record';

const PREFIX = 'asg_live_';
const OPTIONS: KeyResolverOptions = {
  prefix: PREFIX,
  cacheTtlSeconds: 60,
  negativeCacheTtlSeconds: 5,
  maxEntries: 100,
};

let clock: ManualClock;
let store: CountingKeyStore;
let resolver: KeyResolver;

function makeResolver(options: Partial<KeyResolverOptions> = {}): KeyResolver {
  resolver?.close();
  resolver = new KeyResolver(store, clock, { ...OPTIONS, ...options });
  return resolver;
}

async function addKey(overrides: Partial<ApiKeyRecord> = {}): Promise<{ key: string; record: ApiKeyRecord }> {
  const key = generateApiKey(PREFIX);
  const now = new Date(clock.now()).toISOString();
  const record: ApiKeyRecord = {
    id: generateKeyId(),
    name: 'test',
    plan: 'free',
    limits: null,
    hash: hashApiKey(key),
    createdAt: now,
    updatedAt: now,
    revokedAt: null,
    expiresAt: null,
    previousHash: null,
    previousKeyExpiresAt: null,
    ...overrides,
  };
  await store.insert(record);
  return { key, record };
}

function deferred(): { promise: Promise<void>; release: () => void } {
  let release!: () => void;
  const promise = new Promise<void>((resolve) => (release = resolve));
  return { promise, release };
}

beforeEach(() => {
  clock = new ManualClock();
  store = new CountingKeyStore(new SqliteKeyStore({ dataDir: null }));
  makeResolver();
});

afterEach(async () => {
  resolver.close();
  await store.close();
});

describe('KeyResolver syntactic check', () => {
  it.each([
    ['a key of another environment', generateApiKey('asg_test_')],
    ['garbage', 'hello'],
    ['an empty string', ''],
    ['a huge value', PREFIX + 'a'.repeat(10_000)],
    ['an underscore after the prefix', PREFIX + 'a'.repeat(20) + '_' + 'a'.repeat(20)],
  ])('refuses %s without asking the store', async (_label, presented) => {
    expect(await resolver.resolve(presented)).toEqual({ status: 'invalid' });
    expect(store.findByHashCalls).toBe(0);
  });
});

describe('KeyResolver key checksum (CONTRACT §4)', () => {
  it('a key of the new length whose checksum fails is never issued, without the store', async () => {
    const key = generateApiKey(PREFIX);
    const forged = key.slice(0, -1) + (key.endsWith('a') ? 'b' : 'a');
    for (let i = 0; i < 20; i++)
      expect(await resolver.resolve(forged)).toEqual({ status: 'invalid', neverIssued: true });
    expect(await resolver.resolve(generateLegacyApiKey(PREFIX) + 'zzzzzz')).toEqual({
      status: 'invalid',
      neverIssued: true,
    });
    expect(store.findByHashCalls).toBe(0);
  });

  it('a key issued before checksums (32 characters) is still looked up and admitted', async () => {
    const key = generateLegacyApiKey(PREFIX);
    const { record } = await addKey({ hash: hashApiKey(key) });
    expect(await resolver.resolve(key)).toEqual({ status: 'valid', record });
    expect(store.findByHashCalls).toBe(1);
  });

  it('a key with a good checksum that was never stored is looked up as before', async () => {
    expect(await resolver.resolve(generateApiKey(PREFIX))).toEqual({ status: 'invalid' });
    expect(store.findByHashCalls).toBe(1);
  });
});

describe('KeyResolver cache', () => {
  it('resolves a valid key and serves the next requests without a store call', async () => {
    const { key, record } = await addKey();
    expect(await resolver.resolve(key)).toEqual({ status: 'valid', record });
    expect(store.findByHashCalls).toBe(1);
    for (let i = 0; i < 5; i++) expect((await resolver.resolve(key)).status).toBe('valid');
    expect(store.findByHashCalls).toBe(1);
  });

  it('asks the store again once cacheTtlSeconds have passed', async () => {
    const { key } = await addKey();
    await resolver.resolve(key);
    clock.advance(59_999);
    await resolver.resolve(key);
    expect(store.findByHashCalls).toBe(1);
    clock.advance(1);
    await resolver.resolve(key);
    expect(store.findByHashCalls).toBe(2);
  });

  it('reports a revoked key as revoked, with its record', async () => {
    const { key, record } = await addKey({ revokedAt: '2025-12-31T00:00:00.000Z' });
    expect(await resolver.resolve(key)).toEqual({ status: 'revoked', record });
  });

  it('remembers an unknown key for negativeCacheTtlSeconds only', async () => {
    const unknown = generateApiKey(PREFIX);
    expect(await resolver.resolve(unknown)).toEqual({ status: 'invalid' });
    clock.advance(4_999);
    expect(await resolver.resolve(unknown)).toEqual({ status: 'invalid' });
    expect(store.findByHashCalls).toBe(1);
    clock.advance(1);
    expect(await resolver.resolve(unknown)).toEqual({ status: 'invalid' });
    expect(store.findByHashCalls).toBe(2);
  });

  it('drops a cached key the moment the store reports a revocation', async () => {
    const { key, record } = await addKey();
    await resolver.resolve(key);
    await store.revoke(record.id, '2026-01-01T00:00:01.000Z');
    const after = await resolver.resolve(key);
    expect(after.status).toBe('revoked');
    expect(store.findByHashCalls).toBe(2);
  });

  it('drops a cached key when its plan changes', async () => {
    const { key, record } = await addKey();
    await resolver.resolve(key);
    await store.update(record.id, { plan: 'pro' }, '2026-01-01T00:00:01.000Z');
    const after = await resolver.resolve(key);
    expect(after.status === 'valid' && after.record.plan).toBe('pro');
  });

  it('drops a remembered unknown key when that key is created', async () => {
    const key = generateApiKey(PREFIX);
    expect((await resolver.resolve(key)).status).toBe('invalid');
    await store.insert(keyRecordFixture({ id: generateKeyId(), name: 'late', hash: hashApiKey(key) }));
    expect((await resolver.resolve(key)).status).toBe('valid');
  });

  it('asks the store again for every key after a resync, and forgets unknown keys', async () => {
    const { key } = await addKey();
    await resolver.resolve(key);
    await resolver.resolve(generateApiKey(PREFIX));
    expect(resolver.size).toBe(2);
    store.triggerResync();
    expect(resolver.size).toBe(1);
    await resolver.resolve(key);
    expect(store.findByHashCalls).toBe(3);
    await resolver.resolve(key);
    expect(store.findByHashCalls).toBe(3);
  });

  it('after a resync, serves a key it knew while the store fails, and asks again next time', async () => {
    const { key } = await addKey();
    await resolver.resolve(key);
    store.triggerResync();
    store.failNext = new Error('store down');
    expect((await resolver.resolve(key)).status).toBe('valid');
    expect(store.findByHashCalls).toBe(2);
    await resolver.resolve(key);
    expect(store.findByHashCalls).toBe(3);
  });

  it('after a restore put the record back, asks the store again, and serves the key it knew while that fails', async () => {
    const { key, record } = await addKey();
    await resolver.resolve(key);
    store.announce({ id: record.id, hash: record.hash, restored: true });
    store.failNext = new Error('Stream isn’t writeable');
    expect((await resolver.resolve(key)).status).toBe('valid');
    expect(store.findByHashCalls).toBe(2);
    await resolver.resolve(key);
    expect(store.findByHashCalls).toBe(3);
  });

  it('any other change drops the record, so a failing store then fails the request', async () => {
    const { key, record } = await addKey();
    await resolver.resolve(key);
    store.announce({ id: record.id, hash: record.hash });
    store.failNext = new Error('Stream isn’t writeable');
    await expect(resolver.resolve(key)).rejects.toThrow('writeable');
  });

  it('hands out frozen records, so one request cannot change what the next one sees', async () => {
    const { key } = await addKey({ limits: { perMinute: 1, perDay: 2 } });
    const first = await resolver.resolve(key);
    expect(first.status).toBe('valid');
    if (first.status !== 'valid') return;
    expect(Object.isFrozen(first.record)).toBe(true);
    expect(Object.isFrozen(first.record.limits)).toBe(true);
  });
});

describe('KeyResolver bounds', () => {
  it('evicts the least recently used key beyond maxEntries', async () => {
    makeResolver({ maxEntries: 2 });
    const a = await addKey();
    const b = await addKey();
    const c = await addKey();
    await resolver.resolve(a.key);
    await resolver.resolve(b.key);
    await resolver.resolve(a.key); // a is now the most recently used
    await resolver.resolve(c.key); // pushes b out
    expect(store.findByHashCalls).toBe(3);
    await resolver.resolve(a.key);
    await resolver.resolve(c.key);
    expect(store.findByHashCalls).toBe(3);
    await resolver.resolve(b.key);
    expect(store.findByHashCalls).toBe(4);
  });

  it('does not let a flood of unknown keys push out known ones', async () => {
    makeResolver({ maxEntries: 3 });
    const { key } = await addKey();
    await resolver.resolve(key);
    for (let i = 0; i < 50; i++) await resolver.resolve(generateApiKey(PREFIX));
    const calls = store.findByHashCalls;
    expect((await resolver.resolve(key)).status).toBe('valid');
    expect(store.findByHashCalls).toBe(calls);
    expect(resolver.size).toBeLessThanOrEqual(6);
  });

  it('refuses a maxEntries below 1', () => {
    expect(() => makeResolver({ maxEntries: 0 })).toThrow(/maxEntries/);
  });
});

describe('KeyResolver single-flight', () => {
  it('makes one store call for many concurrent misses of one key', async () => {
    const { key } = await addKey();
    const gate = deferred();
    store.hold = gate.promise;
    const pending = Array.from({ length: 20 }, () => resolver.resolve(key));
    gate.release();
    const results = await Promise.all(pending);
    expect(results.every((r) => r.status === 'valid')).toBe(true);
    expect(store.findByHashCalls).toBe(1);
  });

  it('does not cache an answer read before a change that arrived while it was in flight', async () => {
    const { key, record } = await addKey();
    const gate = deferred();
    store.hold = gate.promise;
    const inFlight = resolver.resolve(key); // reads the valid record, then waits
    await new Promise((r) => setImmediate(r));
    await store.revoke(record.id, '2026-01-01T00:00:01.000Z');
    store.hold = null;
    gate.release();
    expect((await inFlight).status).toBe('valid'); // true when it was read
    expect((await resolver.resolve(key)).status).toBe('revoked');
    expect(store.findByHashCalls).toBe(2);
  });

  it('propagates a store error to every waiter and caches nothing', async () => {
    const { key } = await addKey();
    store.failNext = new Error('store down');
    const gateFree = await Promise.allSettled([resolver.resolve(key), resolver.resolve(key)]);
    expect(gateFree.map((r) => r.status)).toEqual(['rejected', 'rejected']);
    expect(store.findByHashCalls).toBe(1);
    expect((await resolver.resolve(key)).status).toBe('valid');
    expect(store.findByHashCalls).toBe(2);
  });
});

describe('KeyResolver while the store fails', () => {
  it('keeps serving a key found before on its expired entry, and refreshes it once the store answers', async () => {
    const { key, record } = await addKey();
    await resolver.resolve(key);
    clock.advance(60_000);
    store.failNext = new Error('store down');
    expect(await resolver.resolve(key)).toEqual({ status: 'valid', record });
    expect(store.findByHashCalls).toBe(2);
    await store.revoke(record.id, '2026-01-01T00:00:00.000Z');
    expect((await resolver.resolve(key)).status).toBe('revoked');
  });

  it('still answers 503-worthy errors for a key it never found', async () => {
    const { key } = await addKey();
    store.failNext = new Error('store down');
    await expect(resolver.resolve(key)).rejects.toThrow('store down');
  });

  it('does not serve an expired entry once the store says the key is gone', async () => {
    const { key } = await addKey();
    await resolver.resolve(key);
    clock.advance(60_000);
    store.findByHashOverride = async () => null;
    expect(await resolver.resolve(key)).toEqual({ status: 'invalid' });
    store.findByHashOverride = null;
    store.failNext = new Error('store down');
    expect(await resolver.resolve(key)).toEqual({ status: 'invalid' });
    expect(store.findByHashCalls).toBe(2);
  });
});

describe('KeyResolver close', () => {
  it('stops listening to the store', () => {
    expect(store.changeListeners).toBe(1);
    resolver.close();
    expect(store.changeListeners).toBe(0);
  });
});

describe('KeyResolver and the key lifecycle', () => {
  it('checks a cached record against its expiry on every request, without asking the store again', async () => {
    const { key } = await addKey({ expiresAt: new Date(clock.now() + 1000).toISOString() });
    expect((await resolver.resolve(key)).status).toBe('valid');
    clock.advance(999);
    expect((await resolver.resolve(key)).status).toBe('valid');
    clock.advance(1);
    expect((await resolver.resolve(key)).status).toBe('expired');
    expect(store.findByHashCalls).toBe(1);
  });

  it('resolves both secrets of a rotated key through the cache; the previous one expires at previousKeyExpiresAt', async () => {
    // Entries outlive the grace period: the end of it must be seen on the cached record.
    makeResolver({ cacheTtlSeconds: 3600 });
    const { key, record } = await addKey();
    const newKey = generateApiKey(PREFIX);
    await store.rotate(
      record.id,
      { hash: hashApiKey(newKey), previousKeyExpiresAt: new Date(clock.now() + 60_000).toISOString() },
      new Date(clock.now()).toISOString(),
    );
    for (let i = 0; i < 3; i++) {
      expect(await resolver.resolve(key)).toMatchObject({ status: 'valid', record: { id: record.id } });
      expect(await resolver.resolve(newKey)).toMatchObject({ status: 'valid', record: { id: record.id } });
    }
    expect(store.findByHashCalls).toBe(2);
    clock.advance(60_000);
    expect((await resolver.resolve(key)).status).toBe('expired');
    expect((await resolver.resolve(newKey)).status).toBe('valid');
    expect(store.findByHashCalls).toBe(2);
  });

  it('a second rotation makes the oldest secret unknown; a revocation makes both revoked', async () => {
    const { key, record } = await addKey();
    const second = generateApiKey(PREFIX);
    const third = generateApiKey(PREFIX);
    const until = new Date(clock.now() + 60_000).toISOString();
    await store.rotate(record.id, { hash: hashApiKey(second), previousKeyExpiresAt: until }, until);
    expect((await resolver.resolve(key)).status).toBe('valid');
    await store.rotate(record.id, { hash: hashApiKey(third), previousKeyExpiresAt: until }, until);
    expect((await resolver.resolve(key)).status).toBe('invalid');
    await store.revoke(record.id, until);
    expect((await resolver.resolve(second)).status).toBe('revoked');
    expect((await resolver.resolve(third)).status).toBe('revoked');
  });
});
