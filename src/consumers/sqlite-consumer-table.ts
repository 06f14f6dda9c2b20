import path from 'node:path';
import type Database from 'better-sqlite3';
import { systemClock } from '../shared/clock';
import { openSqliteDatabase, type Migration } from '../shared/sqlite/sqlite-database';
import { sqliteStatement, type SqliteErrorListener } from '../shared/sqlite/sqlite-failures';
import { SqliteWriteProbe, WRITE_PROBE_TABLE_SQL } from '../shared/sqlite/sqlite-write-probe';
import { byCreation, decodeConsumer, encodeConsumer } from './consumer-record';
import type { ConsumerRecord } from './types';

const CONSUMER_MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    description: 'consumers: id and record JSON',
    up(db) {
      db.exec('CREATE TABLE IF NOT EXISTS consumers (id TEXT PRIMARY KEY, json TEXT NOT NULL) STRICT');
    },
  },
  {
    version: 2,
    description: "the write probe's row (/readyz), as every other file the gateway writes",
    up(db) {
      db.exec(WRITE_PROBE_TABLE_SQL);
    },
  },
];

/** How a table's file is opened: the settings every SQLite file of the gateway takes (config `storage`). */
export interface SqliteTableOptions {
  busyTimeoutMs?: number;
  onSqliteError?: SqliteErrorListener;
}

/**
 * Consumer records in one SQLite file, and in a Map so reads cost no I/O: the in-process store's
 * storage, and the durable copy of the Redis store's records (durable-consumer-store.ts).
 * `file` null keeps them in memory only (tests).
 */
export class SqliteConsumerTable {
  private readonly byId = new Map<string, { record: ConsumerRecord; json: string }>();
  private readonly db: Database.Database;
  private readonly upsert: Database.Statement<[string, string]>;
  private readonly remove: Database.Statement<[string]>;
  private readonly writeProbe: SqliteWriteProbe;
  /** The database's name in errors, metrics and /readyz. */
  private readonly database: string;

  constructor(
    dataDir: string | null,
    fileName: string,
    private readonly options: SqliteTableOptions = {},
  ) {
    const file = dataDir === null ? ':memory:' : path.join(dataDir, fileName);
    this.database = fileName.replace(/\.sqlite$/, '');
    // FULL: a consumer the admin API reported as written survives a power loss too.
    this.db = openSqliteDatabase({
      file,
      migrations: CONSUMER_MIGRATIONS,
      synchronous: 'FULL',
      busyTimeoutMs: options.busyTimeoutMs,
    });
    try {
      this.writeProbe = new SqliteWriteProbe(this.db, this.database, systemClock, options.onSqliteError);
      this.upsert = this.db.prepare(
        'INSERT INTO consumers (id, json) VALUES (?, ?) ON CONFLICT(id) DO UPDATE SET json = excluded.json',
      );
      this.remove = this.db.prepare('DELETE FROM consumers WHERE id = ?');
      for (const row of this.db.prepare('SELECT json FROM consumers').all() as Array<{ json: string }>) {
        const record = decodeConsumer(row.json);
        this.byId.set(record.id, { record, json: row.json });
      }
    } catch (err) {
      this.db.close();
      throw err;
    }
  }

  /** Keeps these records in one transaction; those already held as they are cost no write. */
  putAll(records: readonly ConsumerRecord[]): void {
    const changed = records
      .map((record) => ({ record, json: encodeConsumer(record) }))
      .filter(({ record, json }) => this.byId.get(record.id)?.json !== json);
    if (changed.length === 0) return;
    this.write(() =>
      this.db.transaction(() => {
        for (const { record, json } of changed) this.upsert.run(record.id, json);
      })(),
    );
    for (const entry of changed) this.byId.set(entry.record.id, entry);
  }

  /** Makes the table hold exactly these records (a full read of the store it copies). */
  replaceAll(records: readonly ConsumerRecord[]): void {
    const keep = new Set(records.map((r) => r.id));
    const gone = [...this.byId.keys()].filter((id) => !keep.has(id));
    if (gone.length > 0) {
      this.write(() =>
        this.db.transaction(() => {
          for (const id of gone) this.remove.run(id);
        })(),
      );
      for (const id of gone) this.byId.delete(id);
    }
    this.putAll(records);
  }

  delete(id: string): boolean {
    if (!this.byId.has(id)) return false;
    this.write(() => this.remove.run(id));
    this.byId.delete(id);
    return true;
  }

  /** Throws when the file cannot take a write now (the gateway's /readyz). */
  checkWrites(): void {
    this.writeProbe.check();
  }

  /** One statement on the file; a failure is counted, and one that passes (a full disk, a held lock) becomes a 503. */
  private write<T>(run: () => T): T {
    return sqliteStatement(this.database, run, this.options.onSqliteError);
  }

  get(id: string): ConsumerRecord | null {
    return this.byId.get(id)?.record ?? null;
  }

  all(): ConsumerRecord[] {
    return [...this.byId.values()].map((e) => e.record).sort(byCreation);
  }

  close(): void {
    if (this.db.open) this.db.close();
  }
}
