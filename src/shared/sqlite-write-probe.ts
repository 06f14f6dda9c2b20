import type Database from 'better-sqlite3';
import type { Clock } from './clock';
import { sqliteStatement, type SqliteErrorListener } from './sqlite-failures';

/**
 * The one-row table the probe rewrites. Each database that is probed creates it with its schema
 * (the inventory in a migration, the gateway's own files when they open).
 */
export const WRITE_PROBE_TABLE_SQL = 'CREATE TABLE IF NOT EXISTS write_probe (id INTEGER PRIMARY KEY CHECK (id = 1), at TEXT NOT NULL) STRICT';

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
 * Answers "can this database take a write now?" by making one: an upsert of a single row,
 * committed like any other write (same journal, same fsync). A full disk, a read-only file system,
 * an I/O error or a lock held by another connection fail it exactly as they fail real writes, and it
 * passes again by itself once the cause is gone, so /readyz turns ready without a restart.
 */
export class SqliteWriteProbe {
  private readonly upsert: Database.Statement<[string]>;
  private lastProbeAt = Number.NEGATIVE_INFINITY;
  private lastFailure: Error | null = null;

  constructor(
    private readonly db: Database.Database,
    /** The database's name in errors, metrics and /readyz. */
    readonly database: string,
    private readonly clock: Clock,
    private readonly onError?: SqliteErrorListener,
  ) {
    this.upsert = db.prepare('INSERT INTO write_probe (id, at) VALUES (1, ?) ON CONFLICT (id) DO UPDATE SET at = excluded.at');
  }

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

  private probe(at: string): void {
    const busyTimeout = this.db.pragma('busy_timeout', { simple: true }) as number;
    this.db.pragma(`busy_timeout = ${Math.min(busyTimeout, PROBE_BUSY_TIMEOUT_MS)}`);
    try {
      sqliteStatement(this.database, () => this.upsert.run(at), this.onError);
    } finally {
      this.db.pragma(`busy_timeout = ${busyTimeout}`);
    }
  }
}
