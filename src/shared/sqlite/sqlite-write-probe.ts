import type Database from 'better-sqlite3';
import type { Clock } from '../clock';
import { sqliteStatement, type SqliteErrorListener } from './sqlite-failures';

/**
 * The one-row table the probe rewrites. Each database that is probed creates it with its schema
 * (the inventory in a migration, the gateway's own files when they open).
 */
export const WRITE_PROBE_TABLE_SQL =
  'CREATE TABLE IF NOT EXISTS write_probe (id INTEGER PRIMARY KEY CHECK (id = 1), at TEXT NOT NULL) STRICT';

/**
 * A readiness check probes at most this often; in between it answers what the last probe found.
 * Each probe is a committed, fsync'd write, so a flood of /readyz must not become a flood of fsyncs.
 */
const PROBE_INTERVAL_MS = 1000;

/**
 * How long the probe waits for another connection's write lock. Short: better-sqlite3 blocks the
 * event loop while it waits, and a lock held this long already shows that writes are waiting.
 */
const PROBE_BUSY_TIMEOUT_MS = 100;

/**
 * The table the probe inserts into and empties again. Created by the probe itself (IF NOT EXISTS),
 * so no database needs a migration for it.
 */
const PROBE_ROWS_TABLE_SQL =
  'CREATE TABLE IF NOT EXISTS write_probe_rows (id INTEGER PRIMARY KEY, at TEXT NOT NULL, pad BLOB NOT NULL) STRICT';

/**
 * Answers "can this database take a write now?" by making one: a new row, as large as a page so
 * that it needs a page of its own, inserted and deleted again, each committed like any other write
 * (same journal, same fsync). Rewriting one row in place (the probe before issue 43) still fits on
 * a full disk when a new row does not; a new page does not. A full disk, a read-only file system,
 * an I/O error or a lock held by another connection fail it as they fail real writes, and it passes
 * again by itself once the cause is gone, so /readyz turns ready without a restart.
 */
export class SqliteWriteProbe {
  private statements: { insert: Database.Statement<[string]>; clear: Database.Statement } | null = null;
  private lastProbeAt = Number.NEGATIVE_INFINITY;
  private lastFailure: Error | null = null;

  constructor(
    private readonly db: Database.Database,
    /** The database's name in errors, metrics and /readyz. */
    readonly database: string,
    private readonly clock: Clock,
    private readonly onError?: SqliteErrorListener,
  ) {}

  /** Throws (StorageUnavailableError for a passing cause) when the database cannot take a write. */
  check(): void {
    const now = this.clock.now();
    if (now - this.lastProbeAt >= PROBE_INTERVAL_MS) {
      this.lastProbeAt = now;
      this.lastFailure = null;
      try {
        this.probe(new Date(now).toISOString());
      } catch (err) {
        this.lastFailure = err as Error;
      }
    }
    if (this.lastFailure) throw this.lastFailure;
  }

  /** Prepared on the first probe: creating the table is itself a write, which a full disk may refuse until it is not. */
  private prepared(): { insert: Database.Statement<[string]>; clear: Database.Statement } {
    if (this.statements) return this.statements;
    this.db.exec(PROBE_ROWS_TABLE_SQL);
    const pageSize = this.db.pragma('page_size', { simple: true }) as number;
    this.statements = {
      insert: this.db.prepare(`INSERT INTO write_probe_rows (at, pad) VALUES (?, zeroblob(${pageSize}))`),
      clear: this.db.prepare('DELETE FROM write_probe_rows'),
    };
    return this.statements;
  }

  private probe(at: string): void {
    const busyTimeout = this.db.pragma('busy_timeout', { simple: true }) as number;
    this.db.pragma(`busy_timeout = ${Math.min(busyTimeout, PROBE_BUSY_TIMEOUT_MS)}`);
    try {
      sqliteStatement(
        this.database,
        () => {
          const { insert, clear } = this.prepared();
          // Rows a failed probe left behind go too.
          clear.run();
          insert.run(at);
          clear.run();
        },
        this.onError,
      );
    } finally {
      this.db.pragma(`busy_timeout = ${busyTimeout}`);
    }
  }
}
