import path from 'node:path';
import type Database from 'better-sqlite3';
import { openSqliteDatabase, type Migration } from '../../shared/sqlite/sqlite-database';
import { decodeRecord, encodeRecord, hashesOf } from '../record-changes';
import type { ApiKeyRecord } from '../types';

/**
 * This instance's durable copy of the key records that live in Redis: SQLite under DATA_DIR, and
 * the same records in Maps so a lookup that Redis misses costs no I/O. Fed by this instance's own
 * writes and by the change stream it follows; never told to forget a record that existed (keys are
 * revoked, never deleted; only an import undone forgets what it created), so it still holds every
 * key after Redis lost them.
 *
 * One file per Redis namespace: a DATA_DIR used against two namespaces never mixes their keys.
 * Workers of one instance share the file (WAL, busy timeout); each keeps its own Maps.
 */
export function replicaFileName(namespace: string): string {
  return `keys-replica-${namespace.replace(/[^A-Za-z0-9_-]/g, '_')}.sqlite`;
}

/** The schema of the replica file; files made before it was numbered (user_version 0) have step 1's table already. */
const KEY_REPLICA_MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    description: 'key_records: each record as JSON by id',
    up(db) {
      db.exec('CREATE TABLE IF NOT EXISTS key_records (id TEXT PRIMARY KEY, json TEXT NOT NULL) STRICT');
    },
  },
];

export class KeyReplica {
  private readonly byId = new Map<string, { record: ApiKeyRecord; json: string }>();
  private readonly byHash = new Map<string, ApiKeyRecord>();
  private readonly db: Database.Database;
  private readonly upsert: Database.Statement<[string, string]>;
  private readonly remove: Database.Statement<[string]>;

  constructor(dataDir: string, namespace: string) {
    // FULL: the replica is what answers for the keys once Redis lost them; the default busy timeout (5 s).
    this.db = openSqliteDatabase({
      file: path.join(dataDir, replicaFileName(namespace)),
      migrations: KEY_REPLICA_MIGRATIONS,
      synchronous: 'FULL',
    });
    try {
      this.remove = this.db.prepare('DELETE FROM key_records WHERE id = ?');
      this.upsert = this.db.prepare(
        'INSERT INTO key_records (id, json) VALUES (?, ?) ON CONFLICT(id) DO UPDATE SET json = excluded.json',
      );
      for (const row of this.db.prepare('SELECT json FROM key_records').all() as Array<{ json: string }>)
        this.remember(decodeRecord(row.json), row.json);
    } catch (err) {
      this.db.close();
      throw err;
    }
  }

  /** Keeps these records (one transaction); records already held as they are cost no write. */
  putAll(records: readonly ApiKeyRecord[]): void {
    const changed = records
      .map((record) => ({ record, json: encodeRecord(record) }))
      .filter(({ record, json }) => this.byId.get(record.id)?.json !== json);
    if (changed.length === 0) return;
    this.db.transaction(() => {
      for (const { record, json } of changed) this.upsert.run(record.id, json);
    })();
    for (const { record, json } of changed) this.remember(record, json);
  }

  put(record: ApiKeyRecord): void {
    this.putAll([record]);
  }

  /** Drops a record that no longer exists anywhere: one an import created and then undid. */
  forget(id: string): void {
    const before = this.byId.get(id);
    if (!before) return;
    this.remove.run(id);
    this.byId.delete(id);
    for (const hash of hashesOf(before.record)) if (this.byHash.get(hash)?.id === id) this.byHash.delete(hash);
  }

  findByHash(hash: string): ApiKeyRecord | null {
    return this.byHash.get(hash) ?? null;
  }

  get(id: string): ApiKeyRecord | null {
    return this.byId.get(id)?.record ?? null;
  }

  all(): ApiKeyRecord[] {
    return [...this.byId.values()].map((entry) => entry.record);
  }

  get size(): number {
    return this.byId.size;
  }

  close(): void {
    this.db.close();
  }

  private remember(record: ApiKeyRecord, json: string): void {
    const before = this.byId.get(record.id);
    if (before) for (const hash of hashesOf(before.record)) this.byHash.delete(hash);
    this.byId.set(record.id, { record, json });
    for (const hash of hashesOf(record)) this.byHash.set(hash, record);
  }
}
