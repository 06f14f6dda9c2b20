import path from 'node:path';
import type { Migration } from '../../shared/sqlite/sqlite-database';
import { RecordCopy } from '../../shared/redis/record-copy';
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

/** The durable copy of key records (shared/redis/record-copy.ts), with each record also by its hashes. */
export class KeyReplica {
  private readonly byHash = new Map<string, ApiKeyRecord>();
  private readonly copy: RecordCopy<ApiKeyRecord>;

  constructor(dataDir: string, namespace: string) {
    // FULL (the copy's own): the replica is what answers for the keys once Redis lost them; the default busy timeout (5 s).
    this.copy = new RecordCopy<ApiKeyRecord>({
      file: path.join(dataDir, replicaFileName(namespace)),
      table: 'key_records',
      migrations: KEY_REPLICA_MIGRATIONS,
      codec: { encode: encodeRecord, decode: decodeRecord },
      // Named, so that /readyz probes the file and a write it refuses for a passing cause is a 503.
      database: replicaFileName(namespace).replace(/\.sqlite$/, ''),
      onKept: (record, before) => {
        if (before) for (const hash of hashesOf(before)) this.byHash.delete(hash);
        for (const hash of hashesOf(record)) this.byHash.set(hash, record);
      },
      onForgotten: (before) => {
        for (const hash of hashesOf(before)) if (this.byHash.get(hash)?.id === before.id) this.byHash.delete(hash);
      },
    });
  }

  /** Keeps these records (one transaction); records already held as they are cost no write. */
  putAll(records: readonly ApiKeyRecord[]): void {
    this.copy.putAll(records);
  }

  put(record: ApiKeyRecord): void {
    this.copy.put(record);
  }

  /** Drops a record that no longer exists anywhere: one an import created and then undid. */
  forget(id: string): void {
    this.copy.forget(id);
  }

  findByHash(hash: string): ApiKeyRecord | null {
    return this.byHash.get(hash) ?? null;
  }

  get(id: string): ApiKeyRecord | null {
    return this.copy.get(id);
  }

  all(): ApiKeyRecord[] {
    return this.copy.all();
  }

  get size(): number {
    return this.copy.size;
  }

  /** Throws when the file cannot take a write now (the gateway's /readyz). */
  checkWrites(): void {
    this.copy.checkWrites();
  }

  close(): void {
    this.copy.close();
  }
}
