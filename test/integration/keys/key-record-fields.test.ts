import path from 'node:path';
import Database from 'better-sqlite3';
import { connectRedis, type RedisClient } from '../../../src/shared/redis/redis';
import { RedisKeyStore, redisKeyLayout } from '../../../src/keys/stores/redis-key-store';
import { KEYS_DATABASE_FILE, SqliteKeyStore } from '../../../src/keys/stores/sqlite-key-store';
import { KEY_COLUMNS, LIMIT_FIELDS, RECORD_FIELDS } from '../../../src/keys/stores/key-record-fields';
import { decodeRecord, encodeRecord } from '../../../src/keys/record-changes';
import { exportLine, parseExport } from '../../../src/keys/key-export';
import { hashApiKey } from '../../../src/keys/key-format';
import { POLICY_OPERATION_IDS } from '../../../src/access/operation-ids';
import type { ApiKeyRecord } from '../../../src/keys/types';
import { keyRecordFixture } from '../../support/key-record';
import { testRedisUrl, uniqueNamespace } from '../../support/test-redis';
import { useTempDirs } from '../../support/temp-dirs';

// The one encoding of a key record (src/keys/stores/key-record-fields.ts): a record with every
// field of the table set, and one with none of the optional ones, come back equal from Redis, from
// a keys.sqlite file reopened, and from an export line imported. A field the table lacks, or one
// whose Redis, SQL or line encoding drops it, fails here.

const PREFIX = 'asg_test_';
const { tempDir } = useTempDirs('asg-key-fields-');

/** Every field of the table away from its default, every limit set. A new field needs its value here (the first test says so). */
const EVERY_FIELD_SET: ApiKeyRecord = {
  id: `key_${'1'.repeat(24)}`,
  name: 'every field',
  plan: 'pro',
  limits: {
    perMinute: 7,
    perDay: 70,
    perMonth: 700,
    shadow: false,
    maxInFlight: 3,
    hiddenWindows: ['minute', 'month'],
  },
  hash: hashApiKey(`${PREFIX}every-field-current`),
  createdAt: '2026-01-01T00:00:00.000Z',
  updatedAt: '2026-01-02T00:00:00.000Z',
  revokedAt: '2026-01-03T00:00:00.000Z',
  expiresAt: '2027-01-01T00:00:00.000Z',
  previousHash: hashApiKey(`${PREFIX}every-field-previous`),
  previousKeyExpiresAt: '2026-01-02T12:00:00.000Z',
  billingDay: 17,
  consumerId: `con_${'2'.repeat(24)}`,
  allowedOperations: POLICY_OPERATION_IDS.slice(0, 2),
  allowedAddresses: ['10.0.0.0/8', '2001:db8::/32'],
};

/** The fields at their defaults: no limits of its own, never revoked or rotated, no optional field. */
const NO_OPTIONAL_FIELD: ApiKeyRecord = keyRecordFixture({
  id: `key_${'3'.repeat(24)}`,
  hash: hashApiKey(`${PREFIX}no-optional-field`),
});

const RECORDS = [EVERY_FIELD_SET, NO_OPTIONAL_FIELD];
const NOW = Date.parse('2026-06-01T00:00:00Z');

test('the record with every field set sets every field of the table and every limit', () => {
  expect(RECORD_FIELDS.map((field) => field.name).filter((name) => EVERY_FIELD_SET[name] == null)).toEqual([]);
  expect(LIMIT_FIELDS.map((field) => field.name).filter((name) => EVERY_FIELD_SET.limits![name] === undefined)).toEqual(
    [],
  );
  // Its JSON names each field once, in the table's order; the other record's only the fields every record has.
  expect(Object.keys(JSON.parse(encodeRecord(EVERY_FIELD_SET)))).toEqual(RECORD_FIELDS.map((field) => field.name));
  expect(Object.keys(JSON.parse(encodeRecord(EVERY_FIELD_SET)).limits)).toEqual(
    LIMIT_FIELDS.map((field) => field.name),
  );
  expect(Object.keys(JSON.parse(encodeRecord(NO_OPTIONAL_FIELD)))).toEqual(Object.keys(keyRecordFixture()));
});

describe('through the Redis encoding, on a real Redis', () => {
  let redis: RedisClient;

  beforeAll(async () => {
    redis = await connectRedis({ url: testRedisUrl(), clusterNodes: [], commandTimeoutMs: 2000 });
  });

  afterAll(async () => {
    await redis.quit();
  });

  /** A store on a namespace of its own, closed after `use`. */
  async function withStore(use: (store: RedisKeyStore, namespace: string) => Promise<void>): Promise<void> {
    const namespace = uniqueNamespace('key-fields');
    const store = await RedisKeyStore.open(redis, { namespace });
    try {
      await use(store, namespace);
    } finally {
      await store.close();
    }
  }

  it.each(RECORDS.map((record) => [record.name, record]))('%s: inserted, read by id, by hash, listed', (_, record) =>
    withStore(async (store, namespace) => {
      await store.insert(record);
      expect(await store.get(record.id)).toEqual(record);
      expect(await store.findByHash(record.hash)).toEqual(record);
      expect(await store.list()).toEqual([record]);
      // What Redis holds under the hash is the encoding, byte for byte.
      expect(await redis.hget(redisKeyLayout(namespace).byHash, record.hash)).toBe(encodeRecord(record));
    }),
  );

  it.each(RECORDS.map((record) => [record.name, record]))('%s: imported, and restored after a loss', (_, record) =>
    withStore(async (store) => {
      expect(await store.importRecords([record])).toMatchObject({ imported: 1, unchanged: 0 });
      // An import writes the record under both its hashes, as a rotation does.
      for (const hash of [record.hash, record.previousHash])
        if (hash) expect(await store.findByHash(hash)).toEqual(record);
      // Importing the same state again finds it equal, field for field.
      expect(await store.importRecords([record])).toMatchObject({ imported: 0, unchanged: 1 });
    }).then(() =>
      withStore(async (store) => {
        expect(await store.restoreMissing([record])).toEqual([record.id]);
        expect(await store.get(record.id)).toEqual(record);
      }),
    ),
  );
});

describe('through the SQLite encoding, on a real keys.sqlite', () => {
  function columnsOf(dataDir: string, id: string): Record<string, unknown> {
    const db = new Database(path.join(dataDir, KEYS_DATABASE_FILE), { readonly: true });
    try {
      return db.prepare('SELECT * FROM api_keys WHERE id = ?').get(id) as Record<string, unknown>;
    } finally {
      db.close();
    }
  }

  async function reopened(dataDir: string, id: string): Promise<ApiKeyRecord | null> {
    const store = new SqliteKeyStore({ dataDir });
    try {
      return await store.get(id);
    } finally {
      await store.close();
    }
  }

  it('every column of the table is in the file, and the record with every field set fills each one', async () => {
    const dataDir = tempDir();
    const store = new SqliteKeyStore({ dataDir });
    await store.insert(EVERY_FIELD_SET);
    await store.close();
    const row = columnsOf(dataDir, EVERY_FIELD_SET.id);
    expect(Object.keys(row).sort()).toEqual(KEY_COLUMNS.map((column) => column.name).sort());
    expect(Object.keys(row).filter((column) => row[column] === null)).toEqual([]);
    const db = new Database(path.join(dataDir, KEYS_DATABASE_FILE), { readonly: true });
    expect(db.pragma('user_version', { simple: true })).toBe(Math.max(...KEY_COLUMNS.map((column) => column.since)));
    db.close();
  });

  it.each(RECORDS.map((record) => [record.name, record]))(
    '%s: inserted, updated and imported, each read back from the file',
    async (_, record) => {
      const dataDir = tempDir();
      const store = new SqliteKeyStore({ dataDir });
      await store.insert(record);
      await store.close();
      expect(await reopened(dataDir, record.id)).toEqual(record);

      const writer = new SqliteKeyStore({ dataDir });
      const renamed = await writer.update(record.id, { name: 'renamed' }, '2026-02-01T00:00:00.000Z');
      await writer.close();
      expect(renamed).toEqual({ ...record, name: 'renamed', updatedAt: '2026-02-01T00:00:00.000Z' });
      expect(await reopened(dataDir, record.id)).toEqual(renamed);

      const importer = new SqliteKeyStore({ dataDir });
      expect(await importer.importRecords([record])).toMatchObject({ imported: 1 });
      expect(await importer.importRecords([record])).toMatchObject({ imported: 0, unchanged: 1 });
      await importer.close();
      expect(await reopened(dataDir, record.id)).toEqual(record);
    },
  );

  it.each(LIMIT_FIELDS.filter((field) => !field.required).map((field) => [field.name]))(
    'limits.%s on its own keeps to its column',
    async (name) => {
      const dataDir = tempDir();
      const record = keyRecordFixture({
        limits: { perMinute: 5, perDay: 50, [name]: EVERY_FIELD_SET.limits![name] },
      });
      const store = new SqliteKeyStore({ dataDir });
      await store.insert(record);
      await store.close();
      expect((await reopened(dataDir, record.id))!.limits).toEqual(record.limits);
      expect(decodeRecord(encodeRecord(record)).limits).toEqual(record.limits);
    },
  );
});

describe('through the export and the import', () => {
  it.each(RECORDS.map((record) => [record.name, record]))('%s: one line, read back equal', (_, record) => {
    const line = exportLine(record, PREFIX);
    expect(Object.keys(JSON.parse(line)).sort()).toEqual(
      ['v', 'prefix', ...Object.keys(JSON.parse(encodeRecord(record)))].sort(),
    );
    expect(parseExport(line, { prefix: PREFIX, largestCost: 1, now: NOW, check: () => null })).toEqual([record]);
  });

  it('a line with a field the table does not have is refused, naming it', () => {
    const line = JSON.stringify({ ...JSON.parse(exportLine(NO_OPTIONAL_FIELD, PREFIX)), colour: 'red' });
    expect(() => parseExport(line, { prefix: PREFIX, largestCost: 1, now: NOW, check: () => null })).toThrow(
      'line 1: unknown field "colour": not one an export writes',
    );
  });
});
