import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { connectRedis, type RedisClient } from '../../../src/shared/redis';
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

describeOutbox('Redis', async () => new RedisOutbox(redis, uniqueNamespace('outbox')), async (outbox) => outbox.close());
describeOutbox('SQLite', async () => new SqliteOutbox(fs.mkdtempSync(path.join(os.tmpdir(), 'asg-outbox-'))), async (outbox) => outbox.close());
