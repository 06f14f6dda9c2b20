import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { connectRedis, type RedisClient } from '../../../src/shared/redis/redis';
import {
  MAX_AUDIT_ENTRIES,
  RedisAuditLog,
  SqliteAuditLog,
  type AuditEntry,
  type AuditLog,
} from '../../../src/admin/audit-log';
import { testRedisUrl, uniqueNamespace } from '../../support/test-redis';

/** Both trails keep exactly the last 10,000 entries and answer newest first. */
let redis: RedisClient;
const dirs: string[] = [];

beforeAll(async () => {
  // The cap is under test, not the timeout: 1,000 appends at once outlasted 5 s on a crowded machine.
  redis = await connectRedis({ url: testRedisUrl(), clusterNodes: [], commandTimeoutMs: 30_000 });
});

afterAll(async () => {
  await redis.quit();
  for (const dir of dirs) fs.rmSync(dir, { recursive: true, force: true });
});

function entry(i: number): AuditEntry {
  return {
    at: new Date(Date.UTC(2026, 0, 1) + i).toISOString(),
    action: 'update',
    keyId: `key_${String(i).padStart(24, '0')}`,
    details: { name: `n${i}` },
  };
}

describe.each<[string, () => AuditLog & { close?: () => void }]>([
  ['Redis (capped stream)', () => new RedisAuditLog(redis, uniqueNamespace('audit'))],
  [
    'SQLite (in-process store)',
    () => {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'asg-audit-'));
      dirs.push(dir);
      return new SqliteAuditLog(dir);
    },
  ],
])('%s', (_name, open) => {
  it(`keeps the last ${MAX_AUDIT_ENTRIES} entries, newest first`, async () => {
    const log = open();
    try {
      const total = MAX_AUDIT_ENTRIES + 5;
      for (let start = 0; start < total; start += 1000) {
        await Promise.all(
          Array.from({ length: Math.min(1000, total - start) }, (_, i) => log.append(entry(start + i))),
        );
      }
      const newest = await log.recent(3);
      expect(newest).toEqual([entry(total - 1), entry(total - 2), entry(total - 3)]);
      const all = await log.recent(MAX_AUDIT_ENTRIES + 100);
      expect(all).toHaveLength(MAX_AUDIT_ENTRIES);
      expect(all[all.length - 1]).toEqual(entry(5));
    } finally {
      log.close?.();
    }
  });
});
