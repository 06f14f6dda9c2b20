import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { hashApiKey } from '../../../src/keys/key-format';
import { SqliteKeyStore, KEYS_DATABASE_FILE } from '../../../src/keys/stores/sqlite-key-store';
import { describeKeyStoreContract, newRecord } from './key-store-contract';
import { useTempDirs } from '../../support/temp-dirs';

const { tempDir } = useTempDirs('asg-keys-');

describeKeyStoreContract('SqliteKeyStore (SQLite file)', async () => new SqliteKeyStore({ dataDir: tempDir() }));
describeKeyStoreContract('SqliteKeyStore (no dataDir)', async () => new SqliteKeyStore({ dataDir: null }));

describe('SqliteKeyStore persistence', () => {
  it('keeps keys, updates and revocations across a close and reopen', async () => {
    const dataDir = path.join(tempDir(), 'nested', 'data');
    const first = new SqliteKeyStore({ dataDir });
    const kept = newRecord({ limits: { perMinute: 3, perDay: 30 } }).record;
    const revoked = newRecord({ createdAt: '2026-01-02T00:00:00.000Z' }).record;
    await first.insert(kept);
    await first.insert(revoked);
    await first.update(kept.id, { name: 'renamed', plan: 'enterprise' }, '2026-01-03T00:00:00.000Z');
    await first.revoke(revoked.id, '2026-01-04T00:00:00.000Z');
    const before = await first.list();
    await first.close();

    const second = new SqliteKeyStore({ dataDir });
    try {
      expect(await second.list()).toEqual(before);
      expect(await second.findByHash(kept.hash)).toMatchObject({
        name: 'renamed',
        plan: 'enterprise',
        limits: { perMinute: 3, perDay: 30 },
      });
      expect((await second.findByHash(revoked.hash))?.revokedAt).toBe('2026-01-04T00:00:00.000Z');
    } finally {
      await second.close();
    }
  });

  it('keeps an expiry and a rotation (both hashes) across a close and reopen', async () => {
    const dataDir = tempDir();
    const first = new SqliteKeyStore({ dataDir });
    const { record } = newRecord();
    await first.insert(record);
    await first.update(record.id, { expiresAt: '2027-01-01T00:00:00.000Z' }, '2026-01-02T00:00:00.000Z');
    const newHash = hashApiKey('asg_test_rotated');
    const rotated = await first.rotate(
      record.id,
      { hash: newHash, previousKeyExpiresAt: '2026-01-03T00:00:00.000Z' },
      '2026-01-02T01:00:00.000Z',
    );
    await first.close();

    const second = new SqliteKeyStore({ dataDir });
    try {
      expect(await second.findByHash(newHash)).toEqual(rotated);
      expect(await second.findByHash(record.hash)).toEqual(rotated);
      expect(rotated).toMatchObject({
        expiresAt: '2027-01-01T00:00:00.000Z',
        previousHash: record.hash,
        previousKeyExpiresAt: '2026-01-03T00:00:00.000Z',
      });
    } finally {
      await second.close();
    }
  });

  it('opens a keys.sqlite written before the lifecycle columns existed, and adds them', async () => {
    const dataDir = tempDir();
    const old = new Database(path.join(dataDir, KEYS_DATABASE_FILE));
    old.exec(`CREATE TABLE api_keys (id TEXT PRIMARY KEY, hash TEXT NOT NULL UNIQUE, name TEXT NOT NULL, plan TEXT NOT NULL,
      per_minute INTEGER, per_day INTEGER, created_at TEXT NOT NULL, updated_at TEXT NOT NULL, revoked_at TEXT,
      CHECK ((per_minute IS NULL) = (per_day IS NULL))) STRICT`);
    const { record } = newRecord();
    old
      .prepare('INSERT INTO api_keys VALUES (?, ?, ?, ?, NULL, NULL, ?, ?, NULL)')
      .run(record.id, record.hash, record.name, record.plan, record.createdAt, record.updatedAt);
    old.close();

    const store = new SqliteKeyStore({ dataDir });
    try {
      expect(await store.findByHash(record.hash)).toEqual(record);
      expect(
        (await store.update(record.id, { expiresAt: '2027-01-01T00:00:00.000Z' }, '2026-01-02T00:00:00.000Z'))
          ?.expiresAt,
      ).toBe('2027-01-01T00:00:00.000Z');
    } finally {
      await store.close();
    }
  });

  it('adds the shadow column to a database made before shadow mode, keys following their plan', async () => {
    const dataDir = tempDir();
    const old = new Database(path.join(dataDir, KEYS_DATABASE_FILE));
    old.exec(`CREATE TABLE api_keys (
      id TEXT PRIMARY KEY, hash TEXT NOT NULL UNIQUE, name TEXT NOT NULL, plan TEXT NOT NULL,
      per_minute INTEGER, per_day INTEGER, created_at TEXT NOT NULL, updated_at TEXT NOT NULL, revoked_at TEXT,
      CHECK ((per_minute IS NULL) = (per_day IS NULL))) STRICT`);
    const { record } = newRecord({ limits: { perMinute: 3, perDay: 30 } });
    old
      .prepare('INSERT INTO api_keys VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)')
      .run(record.id, record.hash, record.name, record.plan, 3, 30, record.createdAt, record.updatedAt, null);
    old.close();
    const store = new SqliteKeyStore({ dataDir });
    try {
      expect(await store.get(record.id)).toEqual(record);
      await store.update(record.id, { limits: { perMinute: 3, perDay: 30, shadow: true } }, '2026-01-02T00:00:00.000Z');
      expect((await store.get(record.id))?.limits).toEqual({ perMinute: 3, perDay: 30, shadow: true });
    } finally {
      await store.close();
    }
  });

  it('adds the month columns to a database made before month quotas, and keeps them across a reopen', async () => {
    const dataDir = tempDir();
    const old = new Database(path.join(dataDir, KEYS_DATABASE_FILE));
    old.exec(`CREATE TABLE api_keys (
      id TEXT PRIMARY KEY, hash TEXT NOT NULL UNIQUE, name TEXT NOT NULL, plan TEXT NOT NULL,
      per_minute INTEGER, per_day INTEGER, created_at TEXT NOT NULL, updated_at TEXT NOT NULL, revoked_at TEXT,
      expires_at TEXT, previous_hash TEXT, previous_key_expires_at TEXT, shadow INTEGER,
      CHECK ((per_minute IS NULL) = (per_day IS NULL))) STRICT`);
    const { record } = newRecord({ limits: { perMinute: 3, perDay: 30 } });
    old
      .prepare(
        'INSERT INTO api_keys (id, hash, name, plan, per_minute, per_day, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
      )
      .run(record.id, record.hash, record.name, record.plan, 3, 30, record.createdAt, record.updatedAt);
    old.close();
    let store = new SqliteKeyStore({ dataDir });
    try {
      expect(await store.get(record.id)).toEqual(record);
      const metered = { ...newRecord({ limits: { perMinute: 5, perDay: 50, perMonth: 900 } }).record, billingDay: 28 };
      await store.insert(metered);
      await store.close();
      store = new SqliteKeyStore({ dataDir });
      expect(await store.get(metered.id)).toEqual(metered);
      expect(await store.get(record.id)).toEqual(record);
    } finally {
      await store.close();
    }
  });

  it('writes only the hash to disk, never the key', async () => {
    const dataDir = tempDir();
    const store = new SqliteKeyStore({ dataDir });
    const { key, record } = newRecord();
    await store.insert(record);
    await store.update(record.id, { name: 'x' }, '2026-01-02T00:00:00.000Z');
    await store.close();
    const files = fs.readdirSync(dataDir);
    expect(files).toContain(KEYS_DATABASE_FILE);
    const secret = key.slice('asg_test_'.length);
    let sawHash = false;
    for (const file of files) {
      const bytes = fs.readFileSync(path.join(dataDir, file)).toString('latin1');
      expect(bytes).not.toContain(secret);
      sawHash ||= bytes.includes(record.hash);
    }
    expect(sawHash).toBe(true);
  });

  it('refuses calls after close', async () => {
    const store = new SqliteKeyStore({ dataDir: null });
    await store.close();
    await expect(store.findByHash('x')).rejects.toThrow(/closed/);
    await expect(store.close()).resolves.toBeUndefined();
  });
});
