import path from 'node:path';
import type Database from 'better-sqlite3';
import { openSqliteDatabase, type Migration } from '../../shared/sqlite/sqlite-database';
import { sqliteStatement, type SqliteErrorListener } from '../../shared/sqlite/sqlite-failures';
import { SqliteWriteProbe } from '../../shared/sqlite/sqlite-write-probe';
import { systemClock } from '../../shared/clock';
import { PERIOD_DAYS_KEPT } from './period-ledger';
import { decodeState, encodeState, type SentState, type SentStateStore } from './sent-state';

export const USAGE_EVENT_STATE_FILE = 'usage-event-state.sqlite';
/** This store's name in errors and metrics. */
const USAGE_EVENT_STATE_DATABASE = 'usage-event-state';

const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    description: 'what was sent of each key-day, and events not yet in the outbox',
    up(db) {
      db.exec(`CREATE TABLE IF NOT EXISTS usage_event_state (
        key_id TEXT NOT NULL, period_ms INTEGER NOT NULL, day INTEGER NOT NULL, version INTEGER NOT NULL, body TEXT NOT NULL,
        PRIMARY KEY (key_id, period_ms, day)
      ) STRICT;
      CREATE INDEX IF NOT EXISTS usage_event_state_by_day ON usage_event_state (day)`);
    },
  },
];

/** The sent state of a gateway without Redis: one process, so the lease is always its own. */
export class SqliteSentStateStore implements SentStateStore {
  private readonly db: Database.Database;
  private readonly writeProbe: SqliteWriteProbe;
  private readonly statements;

  constructor(
    dir: string,
    private readonly options: { busyTimeoutMs?: number; onSqliteError?: SqliteErrorListener } = {},
  ) {
    this.db = openSqliteDatabase({
      file: path.join(dir, USAGE_EVENT_STATE_FILE),
      migrations: MIGRATIONS,
      synchronous: 'NORMAL',
      busyTimeoutMs: options.busyTimeoutMs,
    });
    try {
      this.statements = {
        read: this.db.prepare<[string, number, number]>(
          'SELECT version, body FROM usage_event_state WHERE key_id = ? AND period_ms = ? AND day = ?',
        ),
        insert: this.db.prepare<[string, number, number, string]>(
          'INSERT OR IGNORE INTO usage_event_state (key_id, period_ms, day, version, body) VALUES (?, ?, ?, 1, ?)',
        ),
        update: this.db.prepare<[string, string, number, number, number]>(
          'UPDATE usage_event_state SET version = version + 1, body = ? WHERE key_id = ? AND period_ms = ? AND day = ? AND version = ?',
        ),
        dropOld: this.db.prepare<[number]>('DELETE FROM usage_event_state WHERE day <= ?'),
      };
      // The probe creates the table it writes to: no migration (user_version stays 1, so an older build still opens the file).
      this.writeProbe = new SqliteWriteProbe(this.db, USAGE_EVENT_STATE_DATABASE, systemClock, options.onSqliteError);
    } catch (err) {
      this.db.close();
      throw err;
    }
  }

  async read(keyId: string, periodMs: number, day: number): Promise<SentState> {
    const row = this.statements.read.get(keyId, periodMs, day) as { version: number; body: string } | undefined;
    return decodeState(row?.version ?? 0, row?.body ?? null);
  }

  async write(
    keyId: string,
    periodMs: number,
    day: number,
    expected: number,
    next: Omit<SentState, 'version'>,
  ): Promise<boolean> {
    const body = encodeState(next);
    return sqliteStatement(
      USAGE_EVENT_STATE_DATABASE,
      () => {
        if (expected === 0) {
          const inserted = this.statements.insert.run(keyId, periodMs, day, body).changes === 1;
          if (inserted) this.statements.dropOld.run(day - PERIOD_DAYS_KEPT);
          return inserted;
        }
        return this.statements.update.run(body, keyId, periodMs, day, expected).changes === 1;
      },
      this.options.onSqliteError,
    );
  }

  async lease(): Promise<boolean> {
    return true;
  }

  /** Throws when usage-event-state.sqlite cannot take a write now (/readyz). */
  checkWrites(): void {
    this.writeProbe.check();
  }

  close(): void {
    this.db.close();
  }
}
