import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { connectRedis, type RedisClient } from '../../../src/shared/redis/redis';
import { RedisOutbox } from '../../../src/notifications/redis-outbox';
import { SqliteOutbox } from '../../../src/notifications/sqlite-outbox';
import { testRedisUrl, uniqueNamespace } from '../../support/test-redis';
import { describeOutbox } from './outbox-contract';

let redis: RedisClient;

beforeAll(async () => {
  redis = await connectRedis({ url: testRedisUrl(), clusterNodes: [], commandTimeoutMs: 2000 });
});
afterAll(() => {
  redis?.disconnect();
});

describeOutbox(
  'Redis',
  async () => new RedisOutbox(redis, uniqueNamespace('outbox')),
  async (outbox) => outbox.close(),
);
describeOutbox(
  'SQLite',
  async () => new SqliteOutbox(fs.mkdtempSync(path.join(os.tmpdir(), 'asg-outbox-'))),
  async (outbox) => outbox.close(),
);

test('Redis: an outbox written before receivers were named (no receivers hash) is indexed once, so its removed receivers are dropped too', async () => {
  const namespace = uniqueNamespace('outbox-legacy');
  const now = Date.UTC(2026, 2, 10, 12);
  const before = new RedisOutbox(redis, namespace);
  await before.add(
    [
      {
        id: 'msg_1',
        type: 'key.banned',
        body: '{}',
        createdAt: now,
        seenUntil: now + 86_400_000,
        endpoints: ['gone', 'kept'],
      },
    ],
    now,
    100,
  );
  // What the code before this index wrote: the events and their due sets, no receivers hash.
  await redis.del(`${namespace}:webhooks:{outbox}:receivers`);
  const after = new RedisOutbox(redis, namespace);
  expect(await after.keepReceivers('a', ['kept'], now, now + 60_000, 100)).toEqual(['key.banned']);
  expect(await redis.get(`${namespace}:webhooks:{outbox}:receivers-indexed`)).toBe('1');
  expect(await after.claim('gone', 10, now, now + 60_000)).toEqual([]);
  expect((await after.claim('kept', 10, now, now + 60_000)).map((d) => d.eventId)).toEqual(['msg_1']);
  expect(await after.size()).toBe(1);
});
