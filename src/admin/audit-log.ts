import path from 'node:path';
import type Database from 'better-sqlite3';
import { systemClock } from '../shared/clock';
import type { RedisClient } from '../shared/redis/redis';
import { openSqliteDatabase, type Migration } from '../shared/sqlite/sqlite-database';
import { sqliteStatement, type SqliteErrorListener } from '../shared/sqlite/sqlite-failures';
import { SqliteWriteProbe, WRITE_PROBE_TABLE_SQL } from '../shared/sqlite/sqlite-write-probe';

/** Entries kept: the oldest go first beyond this (CONTRACT §5). */
export const MAX_AUDIT_ENTRIES = 10_000;

export type AuditAction =
  'create' | 'update' | 'rotate' | 'revoke' | 'unban' | 'import' | 'credits' | 'delete' | 'reset';

export interface AuditEntry {
  /** ISO instant of the write. */
  at: string;
  action: AuditAction;
  keyId: string;
  /** What changed, in the admin API's own terms. Never a key or a hash. */
  details: Record<string, unknown>;
}

/** Every admin write from every instance, newest first. */
export interface AuditLog {
  append(entry: AuditEntry): Promise<void>;
  /** The newest `limit` entries, newest first. */
  recent(limit: number): Promise<AuditEntry[]>;
}

export const AUDIT_DATABASE_FILE = 'audit.sqlite';

export interface SqliteAuditLogOptions {
  /** Config `storage.busyTimeoutMs`. */
  busyTimeoutMs?: number;
  /** Each failed SQLite statement, by code: `gateway_sqlite_errors_total{database="audit"}`. */
  onSqliteError?: SqliteErrorListener;
  /** Entries given up on because MAX_PENDING_AUDIT_ENTRIES were already waiting. */
  onDropped?: (entries: number) => void;
  /** How often entries the file refused are tried again. */
  retryIntervalMs?: number;
}

/** Entries kept in memory while audit.sqlite refuses writes; the oldest are dropped (and counted) beyond. */
export const MAX_PENDING_AUDIT_ENTRIES = 1000;

const DATABASE = 'audit';

/** The schema of audit.sqlite; files made before it was numbered (user_version 0) have step 1's tables already. */
const AUDIT_MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    description: 'audit entries in order, and write_probe',
    up(db) {
      db.exec('CREATE TABLE IF NOT EXISTS audit (seq INTEGER PRIMARY KEY AUTOINCREMENT, entry TEXT NOT NULL) STRICT');
      db.exec(WRITE_PROBE_TABLE_SQL);
    },
  },
];

/**
 * The single-instance trail when a data directory is given: SQLite under it, bounded the same way.
 * An entry follows an admin write that is already stored, so an entry the file refuses (disk full,
 * lock, read-only) does not undo or fail that write: it waits in memory, shows in `recent`, and is
 * written with the next entry or the next retry, in order.
 */
export class SqliteAuditLog implements AuditLog {
  private readonly db: Database.Database;
  private readonly insert: Database.Statement<[string]>;
  private readonly trim: Database.Statement<[number]>;
  private readonly select: Database.Statement<[number]>;
  private readonly writeProbe: SqliteWriteProbe;
  /** Entries not yet in the file, oldest first. */
  private pending: AuditEntry[] = [];
  private readonly retryTimer: NodeJS.Timeout;

  constructor(
    dataDir: string,
    private readonly options: SqliteAuditLogOptions = {},
  ) {
    // NORMAL (as before): a crash of the process loses nothing committed; entries not yet in the
    // file wait in memory and are retried (MAX_PENDING_AUDIT_ENTRIES).
    this.db = openSqliteDatabase({
      file: path.join(dataDir, AUDIT_DATABASE_FILE),
      migrations: AUDIT_MIGRATIONS,
      synchronous: 'NORMAL',
      busyTimeoutMs: options.busyTimeoutMs,
    });
    try {
      this.insert = this.db.prepare('INSERT INTO audit (entry) VALUES (?)');
      this.trim = this.db.prepare('DELETE FROM audit WHERE seq <= ?');
      this.select = this.db.prepare('SELECT entry FROM audit ORDER BY seq DESC LIMIT ?');
      this.writeProbe = new SqliteWriteProbe(this.db, DATABASE, systemClock, options.onSqliteError);
    } catch (err) {
      this.db.close();
      throw err;
    }
    this.retryTimer = setInterval(() => {
      if (this.pending.length > 0) this.tryWritePending();
    }, options.retryIntervalMs ?? 5000);
    this.retryTimer.unref();
  }

  /** Resolves once the entry is in the file; rejects (StorageUnavailableError) when it waits in memory. */
  async append(entry: AuditEntry): Promise<void> {
    this.pending.push(entry);
    const excess = this.pending.length - MAX_PENDING_AUDIT_ENTRIES;
    if (excess > 0) {
      this.pending.splice(0, excess);
      this.options.onDropped?.(excess);
    }
    this.writePending();
  }

  async recent(limit: number): Promise<AuditEntry[]> {
    if (this.pending.length > 0) this.tryWritePending();
    // Entries still waiting are newer than any in the file.
    const waiting = this.pending.slice().reverse();
    const stored = (this.select.all(limit) as Array<{ entry: string }>).map(
      (row) => JSON.parse(row.entry) as AuditEntry,
    );
    return [...waiting, ...stored].slice(0, limit);
  }

  /** Throws when audit.sqlite cannot take a write now (the gateway's /readyz). */
  checkWrites(): void {
    this.writeProbe.check();
  }

  /** Entries waiting for the file. */
  get pendingCount(): number {
    return this.pending.length;
  }

  close(): void {
    clearInterval(this.retryTimer);
    if (this.pending.length > 0) this.tryWritePending();
    this.db.close();
  }

  /** Writes every waiting entry in one transaction (all or none), then trims; throws when refused. */
  private writePending(): void {
    const entries = this.pending;
    sqliteStatement(
      DATABASE,
      () =>
        this.db.transaction(() => {
          let last = 0;
          for (const entry of entries) last = Number(this.insert.run(JSON.stringify(entry)).lastInsertRowid);
          this.trim.run(last - MAX_AUDIT_ENTRIES);
        })(),
      this.options.onSqliteError,
    );
    this.pending = this.pending.slice(entries.length);
  }

  private tryWritePending(): void {
    try {
      this.writePending();
    } catch {
      // Still refused: the entries wait for the next try; the failure is already counted.
    }
  }
}

/**
 * A capped stream shared by every instance: XADD with MAXLEN keeps exactly the last 10,000 and the
 * stream's ids order entries across instances; XREVRANGE reads them newest first.
 */
export class RedisAuditLog implements AuditLog {
  private readonly key: string;

  constructor(
    private readonly redis: RedisClient,
    namespace: string,
  ) {
    this.key = `${namespace}:audit`;
  }

  async append(entry: AuditEntry): Promise<void> {
    await this.redis.xadd(this.key, 'MAXLEN', String(MAX_AUDIT_ENTRIES), '*', 'entry', JSON.stringify(entry));
  }

  async recent(limit: number): Promise<AuditEntry[]> {
    const rows = await this.redis.xrevrange(this.key, '+', '-', 'COUNT', limit);
    const entries: AuditEntry[] = [];
    for (const [, fields] of rows) {
      const index = fields.indexOf('entry');
      if (index >= 0 && fields[index + 1] !== undefined) entries.push(JSON.parse(fields[index + 1]!) as AuditEntry);
    }
    return entries;
  }
}
