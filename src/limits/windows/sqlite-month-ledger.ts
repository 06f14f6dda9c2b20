import path from 'node:path';
import type Database from 'better-sqlite3';
import { systemClock } from '../../shared/clock';
import { openSqliteDatabase, type Migration } from '../../shared/sqlite/sqlite-database';
import { sqliteStatement, type SqliteErrorListener } from '../../shared/sqlite/sqlite-failures';
import { SqliteWriteProbe, WRITE_PROBE_TABLE_SQL } from '../../shared/sqlite/sqlite-write-probe';
import type { MonthEntry, MonthLedger } from './month-ledger';

export const MONTHS_DATABASE_FILE = 'months.sqlite';
/** This store's name in errors, metrics and /readyz. */
const MONTHS_DATABASE = 'months';

/** The schema of months.sqlite; files made before it was numbered (user_version 0) have step 1's tables already. */
const MONTH_LEDGER_MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    description: 'key_months (one row per key: its current month) and write_probe',
    up(db) {
      db.exec(WRITE_PROBE_TABLE_SQL);
      db.exec(`CREATE TABLE IF NOT EXISTS key_months (
        key_id TEXT PRIMARY KEY, month_start INTEGER NOT NULL, month_end INTEGER NOT NULL, count INTEGER NOT NULL, credits INTEGER NOT NULL
      ) STRICT`);
    },
  },
];

/** The in-process store's month windows and credits, in SQLite under DATA_DIR: one row per key, its current month. */
export class SqliteMonthLedger implements MonthLedger {
  private readonly db: Database.Database;
  private readonly writeProbe: SqliteWriteProbe;
  private readonly upsert: Database.Statement<[string, number, number, number, number]>;

  constructor(
    dataDir: string,
    private readonly options: { busyTimeoutMs?: number; onSqliteError?: SqliteErrorListener } = {},
  ) {
    // FULL: a grant is answered once it is on disk, power loss included.
    this.db = openSqliteDatabase({
      file: path.join(dataDir, MONTHS_DATABASE_FILE),
      migrations: MONTH_LEDGER_MIGRATIONS,
      synchronous: 'FULL',
      busyTimeoutMs: options.busyTimeoutMs,
    });
    try {
      this.upsert = this.db.prepare(
        `INSERT INTO key_months (key_id, month_start, month_end, count, credits) VALUES (?, ?, ?, ?, ?)
         ON CONFLICT (key_id) DO UPDATE SET month_start = excluded.month_start, month_end = excluded.month_end, count = excluded.count, credits = excluded.credits`,
      );
      this.writeProbe = new SqliteWriteProbe(this.db, MONTHS_DATABASE, systemClock, options.onSqliteError);
    } catch (err) {
      this.db.close();
      throw err;
    }
  }

  load(now: number): MonthEntry[] {
    sqliteStatement(
      MONTHS_DATABASE,
      () => this.db.prepare('DELETE FROM key_months WHERE month_end <= ?').run(now),
      this.options.onSqliteError,
    );
    const rows = this.db
      .prepare('SELECT key_id, month_start, month_end, count, credits FROM key_months')
      .all() as Array<{ key_id: string; month_start: number; month_end: number; count: number; credits: number }>;
    return rows.map((row) => ({
      keyId: row.key_id,
      monthStart: row.month_start,
      monthEnd: row.month_end,
      count: row.count,
      credits: row.credits,
    }));
  }

  save(entries: readonly MonthEntry[]): void {
    if (entries.length === 0) return;
    const saveAll = this.db.transaction(() => {
      for (const e of entries) this.upsert.run(e.keyId, e.monthStart, e.monthEnd, e.count, e.credits);
    });
    sqliteStatement(MONTHS_DATABASE, () => saveAll(), this.options.onSqliteError);
  }

  /** Throws when months.sqlite cannot take a write now (the gateway's /readyz). */
  checkWrites(): void {
    this.writeProbe.check();
  }

  close(): void {
    this.db.close();
  }
}
