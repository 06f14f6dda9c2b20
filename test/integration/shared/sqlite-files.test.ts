import path from 'node:path';
import Database from 'better-sqlite3';
import { SqliteAuditLog, AUDIT_DATABASE_FILE } from '../../../src/admin/audit-log';
import { SqliteKeyActivityStore, KEY_USAGE_DATABASE_FILE } from '../../../src/usage/sqlite-key-activity-store';
import { KeyReplica, replicaFileName } from '../../../src/keys/durability/key-replica';
import { encodeRecord } from '../../../src/keys/record-changes';
import { SqliteKeyStore, KEYS_DATABASE_FILE } from '../../../src/keys/stores/sqlite-key-store';
import { KEY_COLUMNS, KEY_TABLE } from '../../../src/keys/stores/key-record-fields';
import { SqliteMonthLedger, MONTHS_DATABASE_FILE } from '../../../src/limits/windows/sqlite-month-ledger';
import { SqliteOutbox, WEBHOOK_OUTBOX_DATABASE_FILE } from '../../../src/notifications/sqlite-outbox';
import { openInventoryDatabase } from '../../../src/inventory';
import { keyRecordFixture } from '../../support/key-record';
import { useTempDirs } from '../../support/temp-dirs';

// Every SQLite file the product keeps, as the code before numbered migrations wrote it (tables
// created on open, user_version 0): each must open, keep its rows and come out at its latest version.

const { tempDir } = useTempDirs('asg-sqlite-');

const WRITE_PROBE = 'CREATE TABLE write_probe (id INTEGER PRIMARY KEY CHECK (id = 1), at TEXT NOT NULL) STRICT';

/** Writes a file the way the old code did: WAL, its tables, no user_version. */
function oldFile(file: string, sql: string, fill: (db: Database.Database) => void): void {
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  db.exec(sql);
  fill(db);
  db.close();
}

/** user_version, journal mode and synchronous (0 OFF, 1 NORMAL, 2 FULL) of a file, read from outside. */
function settingsOf(file: string): { version: number; journal: string; columns: (table: string) => string[] } {
  const db = new Database(file, { readonly: true });
  try {
    const version = db.pragma('user_version', { simple: true }) as number;
    const journal = db.pragma('journal_mode', { simple: true }) as string;
    const tables = new Map<string, string[]>();
    for (const { name } of db.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").all() as Array<{
      name: string;
    }>) {
      tables.set(
        name,
        (db.pragma(`table_info(${name})`) as Array<{ name: string }>).map((c) => c.name),
      );
    }
    return { version, journal, columns: (table) => tables.get(table) ?? [] };
  } finally {
    db.close();
  }
}

/** keys.sqlite's latest version: that of the newest column of the record's table (a new field's `since`). */
const KEYS_LATEST_VERSION = Math.max(...KEY_COLUMNS.map((column) => column.since));

test('keys.sqlite of the code before: its key kept, every column of the record table added, at its latest version', async () => {
  const dataDir = tempDir();
  const record = keyRecordFixture({ id: 'key_old1', plan: 'pro', limits: { perMinute: 3, perDay: 30 } });
  oldFile(
    path.join(dataDir, KEYS_DATABASE_FILE),
    `CREATE TABLE api_keys (id TEXT PRIMARY KEY, hash TEXT NOT NULL UNIQUE, name TEXT NOT NULL, plan TEXT NOT NULL,
      per_minute INTEGER, per_day INTEGER, created_at TEXT NOT NULL, updated_at TEXT NOT NULL, revoked_at TEXT,
      expires_at TEXT, previous_hash TEXT, previous_key_expires_at TEXT, shadow INTEGER, per_month INTEGER, billing_day INTEGER,
      CHECK ((per_minute IS NULL) = (per_day IS NULL))) STRICT; ${WRITE_PROBE}`,
    (db) =>
      db
        .prepare(
          'INSERT INTO api_keys (id, hash, name, plan, per_minute, per_day, created_at, updated_at) VALUES (?, ?, ?, ?, 3, 30, ?, ?)',
        )
        .run(record.id, record.hash, record.name, record.plan, record.createdAt, record.updatedAt),
  );
  const store = new SqliteKeyStore({ dataDir });
  try {
    expect(await store.get(record.id)).toEqual(record);
    store.checkWrites();
  } finally {
    await store.close();
  }
  const file = settingsOf(path.join(dataDir, KEYS_DATABASE_FILE));
  expect(file.version).toBe(KEYS_LATEST_VERSION);
  expect(file.columns(KEY_TABLE).sort()).toEqual(KEY_COLUMNS.map((column) => column.name).sort());
});

test('key-usage.sqlite from before the usage export: its counts kept, units and day_count added as 0, usage-event periods added, version 3', async () => {
  const dataDir = tempDir();
  const day = 20_000;
  oldFile(
    path.join(dataDir, KEY_USAGE_DATABASE_FILE),
    `${WRITE_PROBE};
     CREATE TABLE key_usage (key_id TEXT NOT NULL, day INTEGER NOT NULL, admitted INTEGER NOT NULL, rate_limited INTEGER NOT NULL, banned INTEGER NOT NULL, PRIMARY KEY (key_id, day)) STRICT;
     CREATE TABLE key_last_use (key_id TEXT PRIMARY KEY, at INTEGER NOT NULL) STRICT;`,
    (db) => db.prepare('INSERT INTO key_usage VALUES (?, ?, 7, 2, 1)').run('key_a', day),
  );
  const store = new SqliteKeyActivityStore(dataDir);
  try {
    expect(await store.days('key_a', day, day)).toEqual([{ admitted: 7, rateLimited: 2, banned: 1 }]);
    expect(await store.usageDays(['key_a'], day, day)).toEqual([
      expect.objectContaining({ keyId: 'key_a', day, units: 0 }),
    ]);
  } finally {
    store.close();
  }
  const settings = settingsOf(path.join(dataDir, KEY_USAGE_DATABASE_FILE));
  expect(settings.version).toBe(3);
  expect(settings.columns('key_usage_periods')).toEqual([
    'key_id',
    'period_ms',
    'start',
    'day',
    'units',
    'day_count',
    'admitted',
    'refused',
  ]);
  expect(settings.columns('usage_periods_touched')).toEqual(['period_ms', 'day', 'key_id', 'mark']);
});

test('months.sqlite, audit.sqlite, webhook-outbox.sqlite and the key replica of the code before: rows kept, at their latest version', async () => {
  const dataDir = tempDir();
  const now = Date.UTC(2026, 10, 25);
  oldFile(
    path.join(dataDir, MONTHS_DATABASE_FILE),
    `${WRITE_PROBE}; CREATE TABLE key_months (key_id TEXT PRIMARY KEY, month_start INTEGER NOT NULL, month_end INTEGER NOT NULL, count INTEGER NOT NULL, credits INTEGER NOT NULL) STRICT`,
    (db) => db.prepare('INSERT INTO key_months VALUES (?, ?, ?, 5, 10)').run('key_m', now - 1000, now + 1000),
  );
  const entry = { at: '2026-11-25T00:00:00.000Z', action: 'create', keyId: 'key_a', details: { plan: 'pro' } };
  oldFile(
    path.join(dataDir, AUDIT_DATABASE_FILE),
    `CREATE TABLE audit (seq INTEGER PRIMARY KEY AUTOINCREMENT, entry TEXT NOT NULL) STRICT; ${WRITE_PROBE}`,
    (db) => db.prepare('INSERT INTO audit (entry) VALUES (?)').run(JSON.stringify(entry)),
  );
  oldFile(
    path.join(dataDir, WEBHOOK_OUTBOX_DATABASE_FILE),
    `${WRITE_PROBE};
     CREATE TABLE webhook_events (id TEXT PRIMARY KEY, type TEXT NOT NULL, body TEXT NOT NULL, created_at INTEGER NOT NULL, deliveries_left INTEGER NOT NULL) STRICT;
     CREATE INDEX webhook_events_by_age ON webhook_events (created_at);
     CREATE TABLE webhook_deliveries (endpoint TEXT NOT NULL, event_id TEXT NOT NULL, due_at INTEGER NOT NULL, attempts INTEGER NOT NULL, PRIMARY KEY (endpoint, event_id)) STRICT;
     CREATE INDEX webhook_deliveries_due ON webhook_deliveries (endpoint, due_at);
     CREATE TABLE webhook_seen (id TEXT PRIMARY KEY, until INTEGER NOT NULL) STRICT;`,
    (db) => {
      db.prepare("INSERT INTO webhook_events VALUES ('evt_1', 'key.banned', '{}', ?, 1)").run(now - 5);
      db.prepare("INSERT INTO webhook_deliveries VALUES ('https://r.example/hook', 'evt_1', ?, 0)").run(now - 5);
    },
  );
  const replicated = keyRecordFixture({ id: 'key_r' });
  oldFile(
    path.join(dataDir, replicaFileName('ns')),
    'CREATE TABLE key_records (id TEXT PRIMARY KEY, json TEXT NOT NULL) STRICT',
    (db) => db.prepare('INSERT INTO key_records VALUES (?, ?)').run(replicated.id, encodeRecord(replicated)),
  );

  const ledger = new SqliteMonthLedger(dataDir);
  const audit = new SqliteAuditLog(dataDir);
  const outbox = new SqliteOutbox(dataDir);
  const replica = new KeyReplica(dataDir, 'ns');
  try {
    expect(ledger.load(now)).toEqual([
      { keyId: 'key_m', monthStart: now - 1000, monthEnd: now + 1000, count: 5, credits: 10 },
    ]);
    expect(await audit.recent(10)).toEqual([entry]);
    expect(await outbox.claim('https://r.example/hook', 10, now, now + 60_000)).toEqual([
      expect.objectContaining({ eventId: 'evt_1', type: 'key.banned' }),
    ]);
    expect(replica.get(replicated.id)).toEqual(replicated);
  } finally {
    ledger.close();
    audit.close();
    outbox.close();
    replica.close();
  }
  // The outbox's step 2 names the receivers of each process (issue 48: deliveries to a removed one are dropped).
  for (const [name, version] of [
    [MONTHS_DATABASE_FILE, 1],
    [AUDIT_DATABASE_FILE, 1],
    [WEBHOOK_OUTBOX_DATABASE_FILE, 2],
    [replicaFileName('ns'), 1],
  ] as const) {
    expect({ name, ...settingsOf(path.join(dataDir, name)), columns: undefined }).toEqual({
      name,
      version,
      journal: 'wal',
      columns: undefined,
    });
  }
});

test('a file of a newer version than this build knows is refused, not opened', () => {
  const dataDir = tempDir();
  oldFile(path.join(dataDir, MONTHS_DATABASE_FILE), 'PRAGMA user_version = 9', () => {});
  expect(() => new SqliteMonthLedger(dataDir)).toThrow(
    'database schema version 9 is newer than this build knows (1); refusing to open it',
  );
});

test('the inventory opens in WAL, fsyncs every commit and enforces foreign keys', () => {
  const dataDir = tempDir();
  const db = openInventoryDatabase(path.join(dataDir, 'inventory.sqlite'));
  try {
    expect(db.pragma('journal_mode', { simple: true })).toBe('wal');
    expect(db.pragma('synchronous', { simple: true })).toBe(2);
    expect(db.pragma('foreign_keys', { simple: true })).toBe(1);
  } finally {
    db.close();
  }
});
