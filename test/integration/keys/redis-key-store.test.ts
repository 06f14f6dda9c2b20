import { connectRedis, duplicateForSubscribe, type RedisClient } from '../../../src/shared/redis/redis';
import { ManualClock } from '../../../src/shared/clock';
import { RedisKeyStore, redisKeyLayout } from '../../../src/keys/stores/redis-key-store';
import { KeyService } from '../../../src/keys/key-service';
import type { KeyChange } from '../../../src/keys/types';
import { testRedisUrl, uniqueNamespace } from '../../support/test-redis';
import { describeKeyStoreContract, newRecord } from './key-store-contract';
import { eventually } from '../../support/eventually';

const settings = () => ({ url: testRedisUrl(), clusterNodes: [], commandTimeoutMs: 2000 });
const plans = { free: { perMinute: 60, perDay: 1000 }, pro: { perMinute: 300, perDay: 10000 }, enterprise: {} };

let redis: RedisClient;

beforeAll(async () => {
  redis = await connectRedis(settings());
});

afterAll(async () => {
  await redis.quit();
});

describeKeyStoreContract('RedisKeyStore', () => RedisKeyStore.open(redis, { namespace: uniqueNamespace('keys') }));

/** Every Redis key under a namespace, with its whole content as text. */
async function dumpNamespace(namespace: string): Promise<Map<string, string>> {
  const dump = new Map<string, string>();
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${namespace}*`, 'COUNT', 1000);
    cursor = next;
    for (const key of keys) {
      const type = await redis.type(key);
      let content: unknown;
      if (type === 'string') content = await redis.get(key);
      else if (type === 'hash') content = await redis.hgetall(key);
      else if (type === 'set') content = await redis.smembers(key);
      else if (type === 'list') content = await redis.lrange(key, 0, -1);
      else if (type === 'zset') content = await redis.zrange(key, 0, '-1', 'WITHSCORES');
      else throw new Error(`unexpected type ${type} at ${key}`);
      dump.set(key, JSON.stringify(content));
    }
  } while (cursor !== '0');
  return dump;
}

describe('RedisKeyStore layout', () => {
  const namespace = uniqueNamespace('layout');
  let store: RedisKeyStore;

  beforeAll(async () => {
    store = await RedisKeyStore.open(redis, { namespace });
  });

  afterAll(async () => {
    await store.close();
  });

  it('never holds the plaintext key, in any Redis key under the namespace', async () => {
    const service = new KeyService({ store, prefix: 'asg_test_', plans: () => plans, clock: new ManualClock() });
    const created = await Promise.all([
      service.create({ name: 'one', plan: 'pro' }),
      service.create({ name: 'two', plan: 'enterprise', limits: { perMinute: 1, perDay: 2 } }),
    ]);
    await service.update(created[0].record.id, { name: 'renamed' });
    await service.revoke(created[1].record.id);

    const dump = await dumpNamespace(namespace);
    expect(dump.size).toBeGreaterThan(0);
    const everything = [...dump.entries()].map(([k, v]) => k + v).join('\n');
    for (const { key, record } of created) {
      expect(everything).not.toContain(key);
      expect(everything).not.toContain(key.slice('asg_test_'.length));
      expect(everything).toContain(record.hash);
    }
  });

  it('keeps every key-store key under one hash tag, so scripts are legal on Redis Cluster', async () => {
    const dump = await dumpNamespace(namespace);
    const tags = new Set([...dump.keys()].map((key) => /\{([^}]*)\}/.exec(key)?.[1]));
    expect(tags).toEqual(new Set(['k']));
    const layout = redisKeyLayout(namespace);
    expect(new Set(dump.keys())).toEqual(new Set([layout.byHash, layout.byId, layout.writes, layout.issued]));
  });

  it('returns records with their hash from list(); stripping it is the admin layer’s job', async () => {
    const listed = await store.list();
    expect(listed.length).toBeGreaterThan(0);
    for (const record of listed) expect(record.hash).toMatch(/^[0-9a-f]{64}$/);
  });

  it('finds a record by hash in exactly one Redis command', async () => {
    const { record } = newRecord();
    await store.insert(record);
    // A pass-through spy: it counts what goes to the real Redis and changes nothing.
    const sent = jest.spyOn(redis, 'sendCommand');
    try {
      expect(await store.findByHash(record.hash)).toEqual(record);
      expect(sent).toHaveBeenCalledTimes(1);
      sent.mockClear();
      expect(await store.get(record.id)).toEqual(record);
      expect(sent.mock.calls.length).toBeLessThanOrEqual(2); // EVALSHA, and EVAL once if the script was not cached
    } finally {
      sent.mockRestore();
    }
  });

  it('publishes each change as KeyChange JSON on <namespace>:key-changes, with the issued mark', async () => {
    const listener = await duplicateForSubscribe(redis);
    try {
      const messages: Array<[string, string]> = [];
      listener.on('message', (channel: string, message: string) => messages.push([channel, message]));
      await listener.subscribe(`${namespace}:key-changes`);
      const { record } = newRecord();
      await store.insert(record);
      await store.revoke(record.id, '2026-05-01T00:00:00.000Z');
      await eventually(() => messages.length >= 2, { timeoutMs: 2000, what: 'two messages' });
      const { epoch, seq } = await store.issuedMark();
      expect(messages.map(([channel]) => channel)).toEqual([`${namespace}:key-changes`, `${namespace}:key-changes`]);
      // Each write counts once in the mark, in the order written.
      expect(messages.map(([, message]) => JSON.parse(message))).toEqual([
        { id: record.id, hash: record.hash, epoch, seq: seq - 1 },
        { id: record.id, hash: record.hash, epoch, seq },
      ]);
    } finally {
      await listener.quit();
    }
  });

  it('marks the changes a restore after data loss publishes as restored, and no other change', async () => {
    const other = await RedisKeyStore.open(redis, { namespace });
    try {
      const heard: KeyChange[] = [];
      other.onChange((change) => heard.push(change));
      const { record } = newRecord();
      await store.insert(record);
      await eventually(() => heard.length >= 1, { timeoutMs: 2000, what: 'the insert’s change' });
      // The record's keys gone, as after a restart without persistence; the copy puts it back.
      const layout = redisKeyLayout(namespace);
      await redis.hdel(layout.byHash, record.hash);
      await redis.hdel(layout.byId, record.id);
      expect(await store.restoreMissing([record])).toEqual([record.id]);
      await eventually(() => heard.length >= 2, { timeoutMs: 2000, what: 'the restore’s change' });
      expect(heard.map(({ id, hash, restored }) => ({ id, hash, restored }))).toEqual([
        { id: record.id, hash: record.hash, restored: undefined },
        { id: record.id, hash: record.hash, restored: true },
      ]);
      expect(await other.findByHash(record.hash)).toEqual(record);
    } finally {
      await other.close();
    }
  });

  it('never loses one of many concurrent updates to one key', async () => {
    const { record } = newRecord();
    await store.insert(record);
    const other = await RedisKeyStore.open(redis, { namespace });
    try {
      await Promise.all([
        ...Array.from({ length: 10 }, (_, i) => store.update(record.id, { name: `n${i}` }, '2026-06-01T00:00:00.000Z')),
        other.update(record.id, { limits: { perMinute: 7, perDay: 70 } }, '2026-06-01T00:00:00.000Z'),
        other.revoke(record.id, '2026-06-02T00:00:00.000Z'),
      ]);
      const final = await store.get(record.id);
      expect(final).toMatchObject({ limits: { perMinute: 7, perDay: 70 }, revokedAt: '2026-06-02T00:00:00.000Z' });
      expect(final!.name).toMatch(/^n\d$/);
    } finally {
      await other.close();
    }
  });
});

describe('RedisKeyStore scan', () => {
  it('gives every record once although each is rotated while the scan runs (a consumer delete reads every key of it)', async () => {
    const store = await RedisKeyStore.open(redis, { namespace: uniqueNamespace('scan') });
    try {
      // Several HSCAN steps (RECORDS_PER_READ is 500), all records written in one import.
      const records = Array.from({ length: 1200 }, () => newRecord().record);
      await store.importRecords(records);
      const given: string[] = [];
      let rotated = false;
      await store.scanRecords(async (batch) => {
        given.push(...batch.map((record) => record.id));
        if (rotated) return;
        rotated = true;
        // Every record the scan has not given yet gets a new secret: its former hash becomes its previous one.
        const seen = new Set(given);
        const rest = records.filter((record) => !seen.has(record.id));
        for (const record of rest)
          await store.rotate(
            record.id,
            { hash: newRecord().record.hash, previousKeyExpiresAt: '2026-06-02T00:00:00.000Z' },
            '2026-06-01T00:00:00.000Z',
          );
      });
      expect(given.length).toBe(records.length);
      expect(new Set(given)).toEqual(new Set(records.map((record) => record.id)));
    } finally {
      await store.close();
    }
  });
});

describe('RedisKeyStore subscription', () => {
  it('quits the subscriber it created on close and leaves the caller’s client open', async () => {
    const namespace = uniqueNamespace('close');
    let created: RedisClient | undefined;
    const store = await RedisKeyStore.open(redis, {
      namespace,
      subscriber: async () => (created = await duplicateForSubscribe(redis)),
    });
    expect(created?.status).toBe('ready');
    await store.close();
    expect(created?.status).toBe('end');
    expect(await redis.ping()).toBe('PONG');
  });

  it('unsubscribes a caller-given subscriber on close without quitting it', async () => {
    const namespace = uniqueNamespace('given');
    const subscriber = await duplicateForSubscribe(redis);
    try {
      const store = await RedisKeyStore.open(redis, { namespace, subscriber });
      const channels = () => redis.call('PUBSUB', 'NUMSUB', `${namespace}:key-changes`) as Promise<[string, number]>;
      expect((await channels())[1]).toBe(1);
      await store.close();
      await eventually(async () => (await channels())[1] === 0, { timeoutMs: 2000, what: 'unsubscribed' });
      expect(subscriber.status).toBe('ready');
    } finally {
      await subscriber.quit();
    }
  });

  it('after its subscriber connection is killed, reconnects, asks caches to resync, and hears changes again', async () => {
    const namespace = uniqueNamespace('resync');
    const connectionName = `asg-keys-test-${namespace}`;
    const store = await RedisKeyStore.open(redis, {
      namespace,
      subscriber: async () => {
        const client = await duplicateForSubscribe(redis);
        await client.client('SETNAME', connectionName);
        return client;
      },
    });
    const writer = await RedisKeyStore.open(redis, { namespace });
    try {
      let resyncs = 0;
      store.onResync(() => resyncs++);
      const changes: KeyChange[] = [];
      store.onChange((c) => changes.push(c));

      const clients = (await redis.client('LIST')) as string;
      const line = clients.split('\n').find((l) => l.includes(`name=${connectionName} `));
      const id = /(?:^|\s)id=(\d+)/.exec(line ?? '')?.[1];
      expect(id).toBeDefined();
      await redis.client('KILL', 'ID', id!);

      await eventually(() => resyncs >= 1, { what: 'resync after reconnect' });
      const { record } = newRecord();
      await writer.insert(record);
      await eventually(() => changes.some((c) => c.id === record.id), {
        timeoutMs: 2000,
        what: 'change after reconnect',
      });
      expect(changes.find((c) => c.id === record.id)).toEqual({
        id: record.id,
        hash: record.hash,
        mark: await writer.issuedMark().then(({ epoch, seq }) => ({ epoch, seq })),
      });
    } finally {
      await writer.close();
      await store.close();
    }
  });

  it('rejects open() when the subscriber cannot be set up', async () => {
    await expect(
      RedisKeyStore.open(redis, {
        namespace: uniqueNamespace('fail'),
        subscriber: async () => {
          throw new Error('no subscriber for you');
        },
      }),
    ).rejects.toThrow('no subscriber for you');
  });
});
