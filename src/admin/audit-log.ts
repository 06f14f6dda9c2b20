import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import type { RedisClient } from '../shared/redis';

/** Entries kept: the oldest go first beyond this (CONTRACT §5). */
export const MAX_AUDIT_ENTRIES = 10_000;

export type AuditAction = 'create' | 'update' | 'rotate' | 'revoke' | 'unban' | 'import';

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

/** The single-instance trail when a data directory is given: SQLite under it, bounded the same way. */
export class SqliteAuditLog implements AuditLog {
  private readonly db: Database.Database;
  private readonly insert: Database.Statement<[string]>;
  private readonly trim: Database.Statement<[number]>;
  private readonly select: Database.Statement<[number]>;

  constructor(dataDir: string) {
    fs.mkdirSync(dataDir, { recursive: true });
    this.db = new Database(path.join(dataDir, AUDIT_DATABASE_FILE));
    try {
      this.db.pragma('journal_mode = WAL');
      this.db.pragma('busy_timeout = 5000');
      this.db.exec('CREATE TABLE IF NOT EXISTS audit (seq INTEGER PRIMARY KEY AUTOINCREMENT, entry TEXT NOT NULL) STRICT');
      this.insert = this.db.prepare('INSERT INTO audit (entry) VALUES (?)');
      this.trim = this.db.prepare('DELETE FROM audit WHERE seq <= ?');
      this.select = this.db.prepare('SELECT entry FROM audit ORDER BY seq DESC LIMIT ?');
    } catch (err) {
      this.db.close();
      throw err;
    }
  }

  async append(entry: AuditEntry): Promise<void> {
    const { lastInsertRowid } = this.insert.run(JSON.stringify(entry));
    this.trim.run(Number(lastInsertRowid) - MAX_AUDIT_ENTRIES);
  }

  async recent(limit: number): Promise<AuditEntry[]> {
    return (this.select.all(limit) as Array<{ entry: string }>).map((row) => JSON.parse(row.entry) as AuditEntry);
  }

  close(): void {
    this.db.close();
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
