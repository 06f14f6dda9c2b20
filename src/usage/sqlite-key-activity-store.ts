import path from 'node:path';
import type Database from 'better-sqlite3';
import { addColumnIfMissing, openSqliteDatabase, type Migration } from '../shared/sqlite/sqlite-database';
import { sqliteStatement, type SqliteErrorListener } from '../shared/sqlite/sqlite-failures';
import { SqliteWriteProbe, WRITE_PROBE_TABLE_SQL } from '../shared/sqlite/sqlite-write-probe';
import { systemClock, type Clock } from '../shared/clock';
import { PERIOD_DAYS_KEPT, type TouchedKeyDay, type UsagePeriodLedger } from './events/period-ledger';
import {
  USAGE_EXPORT_DAYS,
  type DayUsage,
  type KeyActivityStore,
  type KeyTally,
  type PeriodTally,
  type UsageDay,
} from './key-activity';

export const KEY_USAGE_DATABASE_FILE = 'key-usage.sqlite';
/** This store's name in errors, metrics and /readyz. */
const KEY_USAGE_DATABASE = 'key-usage';

/**
 * The single-instance store when a data directory is given: SQLite under it, so the history and
 * last use survive a restart like the keys do. Written only by flushes (every few seconds, one
 * transaction), never on the request path. Days are kept USAGE_EXPORT_DAYS (the usage export);
 * GET /admin/keys/{id}/usage shows the last 90 of them.
 */
export class SqliteKeyActivityStore implements KeyActivityStore, UsagePeriodLedger {
  /** add() is one transaction: a refused batch stored nothing and can be sent again. */
  readonly retriesAreSafe = true;
  private readonly db: Database.Database;
  private readonly writeProbe: SqliteWriteProbe;
  private readonly addCounts: Database.Statement<[string, number, number, number, number, number, number]>;
  private readonly addLastUse: Database.Statement<[string, number]>;
  private readonly dropOld: Database.Statement<[number]>;
  private readonly selectDays: Database.Statement<[string, number, number]>;
  private readonly periodStatements: ReturnType<typeof preparePeriodStatements>;
  /** The day the history was last cleared through by this process: once a day is enough (a whole-table scan). */
  private prunedThrough = Number.NEGATIVE_INFINITY;

  constructor(
    dataDir: string,
    private readonly options: { busyTimeoutMs?: number; onSqliteError?: SqliteErrorListener; clock?: Clock } = {},
  ) {
    // NORMAL (as before): counts are flushed in batches every few seconds, so the last of them are
    // in memory, not on disk, whatever the fsync setting.
    this.db = openSqliteDatabase({
      file: path.join(dataDir, KEY_USAGE_DATABASE_FILE),
      migrations: KEY_ACTIVITY_MIGRATIONS,
      synchronous: 'NORMAL',
      busyTimeoutMs: options.busyTimeoutMs,
    });
    try {
      this.addCounts = this.db.prepare(
        `INSERT INTO key_usage (key_id, day, admitted, rate_limited, banned, units, day_count) VALUES (?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (key_id, day) DO UPDATE SET admitted = admitted + excluded.admitted,
           rate_limited = rate_limited + excluded.rate_limited, banned = banned + excluded.banned,
           units = units + excluded.units, day_count = max(day_count, excluded.day_count)`,
      );
      this.addLastUse = this.db.prepare(
        `INSERT INTO key_last_use (key_id, at) VALUES (?, ?) ON CONFLICT (key_id) DO UPDATE SET at = max(at, excluded.at)`,
      );
      this.dropOld = this.db.prepare('DELETE FROM key_usage WHERE day <= ?');
      this.selectDays = this.db.prepare(
        'SELECT day, admitted, rate_limited, banned FROM key_usage WHERE key_id = ? AND day BETWEEN ? AND ?',
      );
      this.periodStatements = preparePeriodStatements(this.db);
      this.writeProbe = new SqliteWriteProbe(this.db, KEY_USAGE_DATABASE, systemClock, options.onSqliteError);
    } catch (err) {
      this.db.close();
      throw err;
    }
  }

  async add(day: number, tallies: ReadonlyMap<string, KeyTally>): Promise<void> {
    const addAll = this.db.transaction(() => {
      for (const [keyId, tally] of tallies) {
        this.addCounts.run(keyId, day, tally.admitted, tally.rateLimited, tally.banned, tally.units, tally.dayCount);
        if (tally.lastUsedAt > 0) this.addLastUse.run(keyId, tally.lastUsedAt);
        this.addPeriods(keyId, day, tally);
      }
      if (day - USAGE_EXPORT_DAYS > this.prunedThrough) {
        this.dropOld.run(day - USAGE_EXPORT_DAYS);
        this.periodStatements.dropOld.run(day - PERIOD_DAYS_KEPT);
      }
    });
    sqliteStatement(KEY_USAGE_DATABASE, () => addAll(), this.options.onSqliteError);
    this.prunedThrough = Math.max(this.prunedThrough, day - USAGE_EXPORT_DAYS);
  }

  /** The key's usage-event periods and the mark the closer looks for, in add()'s transaction. */
  private addPeriods(keyId: string, day: number, tally: KeyTally): void {
    if (!tally.periods || tally.periods.buckets.size === 0) return;
    const { periodMs, buckets } = tally.periods;
    for (const [start, p] of buckets)
      this.periodStatements.add.run(keyId, periodMs, start, day, p.units, p.dayCount, p.admitted, p.refused);
    this.periodStatements.touch.run(periodMs, day, keyId, (this.options.clock ?? systemClock).now());
  }

  async touched(max: number): Promise<TouchedKeyDay[]> {
    const rows = this.periodStatements.touched.all(max) as Array<{
      period_ms: number;
      day: number;
      key_id: string;
      mark: number;
    }>;
    return rows.map((r) => ({ periodMs: r.period_ms, day: r.day, keyId: r.key_id, mark: r.mark }));
  }

  async untouch(entry: TouchedKeyDay): Promise<void> {
    sqliteStatement(
      KEY_USAGE_DATABASE,
      () => this.periodStatements.untouch.run(entry.periodMs, entry.day, entry.keyId, entry.mark),
      this.options.onSqliteError,
    );
  }

  async periodsOf(keyId: string, periodMs: number, day: number): Promise<Map<number, PeriodTally>> {
    const rows = this.periodStatements.periods.all(keyId, periodMs, day) as Array<PeriodTally & { start: number }>;
    return new Map(rows.map(({ start, ...counts }) => [start, counts]));
  }

  /** Throws when key-usage.sqlite cannot take a write now (the gateway's /readyz). */
  checkWrites(): void {
    this.writeProbe.check();
  }

  async days(keyId: string, firstDay: number, lastDay: number): Promise<Array<Omit<DayUsage, 'date'>>> {
    const rows = this.selectDays.all(keyId, firstDay, lastDay) as Array<{
      day: number;
      admitted: number;
      rate_limited: number;
      banned: number;
    }>;
    const byDay = new Map(rows.map((r) => [r.day, r]));
    const result: Array<Omit<DayUsage, 'date'>> = [];
    for (let day = firstDay; day <= lastDay; day++) {
      const r = byDay.get(day);
      result.push({ admitted: r?.admitted ?? 0, rateLimited: r?.rate_limited ?? 0, banned: r?.banned ?? 0 });
    }
    return result;
  }

  async lastUsed(keyIds: readonly string[]): Promise<Map<string, number>> {
    const result = new Map<string, number>();
    if (keyIds.length === 0) return result;
    // In slices: SQLite bounds the number of parameters of one statement.
    for (let start = 0; start < keyIds.length; start += 500) {
      const slice = keyIds.slice(start, start + 500);
      const rows = this.db
        .prepare(`SELECT key_id, at FROM key_last_use WHERE key_id IN (${slice.map(() => '?').join(',')})`)
        .all(...slice) as Array<{ key_id: string; at: number }>;
      for (const row of rows) result.set(row.key_id, row.at);
    }
    return result;
  }

  async usageDays(keyIds: readonly string[], firstDay: number, lastDay: number): Promise<UsageDay[]> {
    const order = new Map(keyIds.map((id, i) => [id, i]));
    const result: UsageDay[] = [];
    // In slices: SQLite bounds the number of parameters of one statement.
    for (let start = 0; start < keyIds.length; start += 500) {
      const slice = keyIds.slice(start, start + 500);
      const rows = this.db
        .prepare(
          `SELECT key_id AS keyId, day, admitted, rate_limited AS rateLimited, banned, units, day_count AS dayCount FROM key_usage
           WHERE key_id IN (${slice.map(() => '?').join(',')}) AND day BETWEEN ? AND ?`,
        )
        .all(...slice, firstDay, lastDay) as UsageDay[];
      result.push(...rows);
    }
    return result.sort((a, b) => order.get(a.keyId)! - order.get(b.keyId)! || a.day - b.day);
  }

  close(): void {
    this.db.close();
  }
}

function preparePeriodStatements(db: Database.Database) {
  return {
    add: db.prepare<[string, number, number, number, number, number, number, number]>(
      `INSERT INTO key_usage_periods (key_id, period_ms, start, day, units, day_count, admitted, refused) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (key_id, period_ms, start) DO UPDATE SET units = units + excluded.units, day_count = max(day_count, excluded.day_count),
         admitted = admitted + excluded.admitted, refused = refused + excluded.refused`,
    ),
    touch: db.prepare<[number, number, string, number]>(
      `INSERT INTO usage_periods_touched (period_ms, day, key_id, mark) VALUES (?, ?, ?, ?)
       ON CONFLICT (period_ms, day, key_id) DO UPDATE SET mark = max(mark, excluded.mark)`,
    ),
    touched: db.prepare<[number]>(
      'SELECT period_ms, day, key_id, mark FROM usage_periods_touched ORDER BY mark LIMIT ?',
    ),
    untouch: db.prepare<[number, number, string, number]>(
      'DELETE FROM usage_periods_touched WHERE period_ms = ? AND day = ? AND key_id = ? AND mark <= ?',
    ),
    periods: db.prepare<[string, number, number]>(
      'SELECT start, units, day_count AS dayCount, admitted, refused FROM key_usage_periods WHERE key_id = ? AND period_ms = ? AND day = ?',
    ),
    dropOld: db.prepare<[number]>('DELETE FROM key_usage_periods WHERE day <= ?'),
  };
}

/** The schema of the activity file; files made before it was numbered (user_version 0) may have any prefix of it. */
const KEY_ACTIVITY_MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    description: 'key_usage (per key and day), key_last_use and write_probe',
    up(db) {
      db.exec(WRITE_PROBE_TABLE_SQL);
      db.exec(`
        CREATE TABLE IF NOT EXISTS key_usage (
          key_id TEXT NOT NULL, day INTEGER NOT NULL,
          admitted INTEGER NOT NULL, rate_limited INTEGER NOT NULL, banned INTEGER NOT NULL,
          PRIMARY KEY (key_id, day)
        ) STRICT;
        CREATE TABLE IF NOT EXISTS key_last_use (key_id TEXT PRIMARY KEY, at INTEGER NOT NULL) STRICT;`);
    },
  },
  {
    version: 2,
    description: 'units and day_count for the usage export (issue 40); 0 for the days counted before',
    up(db) {
      addColumnIfMissing(db, 'key_usage', 'units', 'INTEGER NOT NULL DEFAULT 0');
      addColumnIfMissing(db, 'key_usage', 'day_count', 'INTEGER NOT NULL DEFAULT 0');
    },
  },
  {
    version: 3,
    description:
      'usage-event periods per key (issue 53), written with the day counts, and the key-days the closer has yet to look at',
    up(db) {
      db.exec(`
        CREATE TABLE IF NOT EXISTS key_usage_periods (
          key_id TEXT NOT NULL, period_ms INTEGER NOT NULL, start INTEGER NOT NULL, day INTEGER NOT NULL,
          units INTEGER NOT NULL, day_count INTEGER NOT NULL, admitted INTEGER NOT NULL, refused INTEGER NOT NULL,
          PRIMARY KEY (key_id, period_ms, start)
        ) STRICT;
        CREATE INDEX IF NOT EXISTS key_usage_periods_by_day ON key_usage_periods (key_id, period_ms, day);
        CREATE TABLE IF NOT EXISTS usage_periods_touched (
          period_ms INTEGER NOT NULL, day INTEGER NOT NULL, key_id TEXT NOT NULL, mark INTEGER NOT NULL,
          PRIMARY KEY (period_ms, day, key_id)
        ) STRICT;
        CREATE INDEX IF NOT EXISTS usage_periods_touched_by_mark ON usage_periods_touched (mark);`);
    },
  },
];
