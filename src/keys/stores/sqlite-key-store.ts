import path from 'node:path';
import type Database from 'better-sqlite3';
import { systemClock } from '../../shared/clock';
import { openSqliteDatabase } from '../../shared/sqlite/sqlite-database';
import { sqliteStatement, type SqliteErrorListener } from '../../shared/sqlite/sqlite-failures';
import { SqliteWriteProbe, WRITE_PROBE_TABLE_SQL } from '../../shared/sqlite/sqlite-write-probe';
import { Listeners } from '../../shared/listeners';
import { applyPatch, applyRevoke, applyRotate, byCreation, copyRecord, hashesOf } from '../record-changes';
import { applyImport } from './sqlite-key-import';
import { KEY_SQL, keyTableMigrations, recordOfRow, rowOf, type KeyRow } from './key-record-fields';
import { closedConsumerConflict, consumerEntered, keepRevocations, movesOf } from './import-rules';
import { setImmediate as turnOfEventLoop } from 'node:timers/promises';
import {
  ConsumerClosed,
  type ApiKeyRecord,
  type ImportResult,
  type KeyChange,
  type KeyPatch,
  type KeyRotation,
  type KeyStore,
} from '../types';

export interface SqliteKeyStoreOptions {
  /** Directory of `keys.sqlite` (config `dataDir`); null keeps keys in memory only (tests). */
  dataDir: string | null;
  /** Config `storage.busyTimeoutMs`: how long a write waits for another connection's lock (then 503). */
  busyTimeoutMs?: number;
  /** Each failed SQLite statement, by code: `gateway_sqlite_errors_total{database="keys"}`. */
  onSqliteError?: SqliteErrorListener;
}

/** This store's name in errors, metrics and /readyz. */
const DATABASE = 'keys';

export const KEYS_DATABASE_FILE = 'keys.sqlite';

/** Rows an import writes between turns of the event loop; records an export hands over at once. */
const IMPORT_STEP = 500;

/** The schema of keys.sqlite: the record's columns (key-record-fields.ts), a step for each version that added some. */
const KEY_STORE_MIGRATIONS = keyTableMigrations({
  description: 'api_keys (the first release) and write_probe',
  up: (db) => db.exec(WRITE_PROBE_TABLE_SQL),
});

/**
 * The in-process key store of the single-instance mode. Every key is held in Maps, so a lookup
 * never touches disk; every write goes synchronously to SQLite under `dataDir` first, so a restart
 * (or a crash right after an admin call returned) keeps it. The plaintext key is never written.
 */
export class SqliteKeyStore implements KeyStore {
  private readonly byHash = new Map<string, ApiKeyRecord>();
  private readonly byId = new Map<string, ApiKeyRecord>();
  private readonly changeListeners = new Listeners<[KeyChange]>();
  private readonly db: Database.Database;
  private readonly insertRow: Database.Statement<KeyRow>;
  private readonly updateRow: Database.Statement<KeyRow>;
  private readonly upsertRow: Database.Statement<KeyRow>;
  private readonly writeProbe: SqliteWriteProbe;
  private readonly onSqliteError?: SqliteErrorListener;
  private closed = false;
  /** Set while an import's transaction is open (importRecords). */
  private importing: Promise<void> | null = null;
  /** Consumers being deleted (closeConsumer): their holders and until when (ms since the epoch) they hold. */
  private readonly closedConsumers = new Map<string, { holders: Set<string>; until: number }>();

  constructor(options: SqliteKeyStoreOptions) {
    const file = options.dataDir === null ? ':memory:' : path.join(options.dataDir, KEYS_DATABASE_FILE);
    // FULL: a key the admin API reported as created or revoked survives a power loss too.
    this.db = openSqliteDatabase({
      file,
      migrations: KEY_STORE_MIGRATIONS,
      synchronous: 'FULL',
      busyTimeoutMs: options.busyTimeoutMs,
      requireWritableDir: true,
    });
    this.onSqliteError = options.onSqliteError;
    try {
      this.insertRow = this.db.prepare<KeyRow>(KEY_SQL.insert);
      this.updateRow = this.db.prepare<KeyRow>(KEY_SQL.update);
      this.upsertRow = this.db.prepare<KeyRow>(KEY_SQL.upsert);
      this.writeProbe = new SqliteWriteProbe(this.db, DATABASE, systemClock, options.onSqliteError);
      for (const row of this.db.prepare('SELECT * FROM api_keys').all() as KeyRow[]) this.remember(recordOfRow(row));
    } catch (err) {
      this.db.close();
      throw err;
    }
  }

  async insert(record: ApiKeyRecord): Promise<void> {
    await this.writable();
    this.assertOpen();
    // Decided after the wait, with no await before the write: nothing can close the consumer in between.
    this.assertConsumerOpen(record.consumerId);
    if (this.byId.has(record.id)) throw new Error(`key id ${record.id} already exists`);
    if (hashesOf(record).some((h) => this.byHash.has(h))) throw new Error('key hash already exists');
    // Disk first, and only then memory: a write the file refused (503) leaves no key in the Maps.
    this.write(() => this.insertRow.run(rowOf(record)));
    this.remember(copyRecord(record));
    this.changeListeners.emit({ id: record.id, hash: record.hash });
  }

  async findByHash(hash: string): Promise<ApiKeyRecord | null> {
    this.assertOpen();
    const record = this.byHash.get(hash);
    return record ? copyRecord(record) : null;
  }

  async get(id: string): Promise<ApiKeyRecord | null> {
    this.assertOpen();
    const record = this.byId.get(id);
    return record ? copyRecord(record) : null;
  }

  /** Every record, oldest first, each with its `hash`: the admin layer strips it (`withoutHash`). */
  async list(): Promise<ApiKeyRecord[]> {
    this.assertOpen();
    return [...this.byId.values()].sort(byCreation).map(copyRecord);
  }

  async update(id: string, patch: KeyPatch, updatedAt: string): Promise<ApiKeyRecord | null> {
    await this.writable();
    return this.replace(id, (record) => applyPatch(record, patch, updatedAt));
  }

  async revoke(id: string, revokedAt: string): Promise<ApiKeyRecord | null> {
    await this.writable();
    return this.replace(id, (record) => applyRevoke(record, revokedAt));
  }

  async rotate(id: string, rotation: KeyRotation, rotatedAt: string): Promise<ApiKeyRecord | null> {
    await this.writable();
    this.assertOpen();
    if (this.byHash.has(rotation.hash)) throw new Error('key hash already exists');
    return this.replace(id, (record) => applyRotate(record, rotation, rotatedAt));
  }

  /**
   * One SQLite transaction, so a failure leaves disk and memory as they were. The transaction is
   * written a few hundred rows at a time with the event loop turning in between (a 100,000-record
   * import would otherwise hold the listener for seconds); meanwhile this store's other writes wait
   * for it (`writable`), so none joins the transaction or is undone with it. The maps change only
   * once it is committed. A revoked key stays revoked.
   */
  async importRecords(records: ApiKeyRecord[]): Promise<ImportResult> {
    await this.writable();
    this.assertOpen();
    let done!: () => void;
    this.importing = new Promise<void>((resolve) => (done = resolve));
    try {
      const plan = applyImport(
        this.byId,
        this.byHash,
        keepRevocations(records, (id) => this.byId.get(id)),
      );
      this.assertEnteredConsumersOpen(plan.changed);
      // Read before the maps change; the other writes wait for the import, so none moves a key meanwhile.
      const moved = movesOf(plan.changed, (id) => this.byId.get(id));
      await this.writeInSteps(plan.changed);
      // Committed: the maps follow, a step at a time (other writes still wait; a lookup meanwhile
      // sees a record as it was or as imported, both on disk states of the last moments).
      for (let at = 0; at < plan.changed.length; at += IMPORT_STEP) {
        this.applyImported(plan.changed.slice(at, at + IMPORT_STEP));
        await turnOfEventLoop();
      }
      return {
        imported: plan.changed.length,
        unchanged: plan.unchanged,
        ids: plan.changed.map((record) => record.id),
        moved,
      };
    } finally {
      this.importing = null;
      done();
    }
  }

  async count(): Promise<number> {
    this.assertOpen();
    return this.byId.size;
  }

  /** Every record, IMPORT_STEP at a time with the event loop turning between (an export at scale). */
  async scanRecords(onBatch: (records: ApiKeyRecord[]) => void | Promise<void>): Promise<void> {
    this.assertOpen();
    const records = [...this.byId.values()].sort(byCreation);
    for (let at = 0; at < records.length; at += IMPORT_STEP) {
      await onBatch(records.slice(at, at + IMPORT_STEP).map(copyRecord));
      await turnOfEventLoop();
    }
  }

  private async writeInSteps(changed: ApiKeyRecord[]): Promise<void> {
    if (changed.length === 0) return;
    this.write(() => this.db.exec('BEGIN IMMEDIATE'));
    try {
      for (let at = 0; at < changed.length; at += IMPORT_STEP) {
        this.write(() => {
          for (const record of changed.slice(at, at + IMPORT_STEP)) this.upsertRow.run(rowOf(record));
        });
        await turnOfEventLoop();
        this.assertOpen();
      }
      this.write(() => this.db.exec('COMMIT'));
    } catch (err) {
      if (this.db.inTransaction) this.db.exec('ROLLBACK');
      throw err;
    }
  }

  private applyImported(changed: ApiKeyRecord[]): void {
    for (const record of changed) {
      const before = this.byId.get(record.id);
      const touched = new Set([...(before ? hashesOf(before) : []), ...hashesOf(record)]);
      if (before) for (const hash of hashesOf(before)) this.byHash.delete(hash);
      this.remember(copyRecord(record));
      for (const hash of touched) this.changeListeners.emit({ id: record.id, hash });
    }
  }

  /** Waits while an import's transaction is open: a write now would join it. */
  private async writable(): Promise<void> {
    while (this.importing) await this.importing;
  }

  onChange(listener: (change: KeyChange) => void): () => void {
    return this.changeListeners.add(listener);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    // An import in progress sees the store closed at its next step and rolls back first.
    await this.importing;
    this.changeListeners.clear();
    this.db.close();
  }

  private replace(id: string, transform: (record: ApiKeyRecord) => ApiKeyRecord): ApiKeyRecord | null {
    this.assertOpen();
    const current = this.byId.get(id);
    if (!current) return null;
    const next = transform(current);
    if (next === current) return copyRecord(current);
    if (next.consumerId !== current.consumerId) this.assertConsumerOpen(next.consumerId);
    // Disk first: if the write fails, memory still matches what a restart would load.
    const result = this.write(() => this.updateRow.run(rowOf(next)));
    if (result.changes !== 1) throw new Error(`key ${id} is missing from ${KEYS_DATABASE_FILE}`);
    const before = hashesOf(current);
    for (const hash of before) this.byHash.delete(hash);
    this.remember(next);
    for (const hash of new Set([...before, ...hashesOf(next)])) this.changeListeners.emit({ id: next.id, hash });
    return copyRecord(next);
  }

  async closeConsumer(consumerId: string, token: string, holdMs: number): Promise<boolean> {
    const now = Date.now();
    const entry = this.closedConsumers.get(consumerId);
    const held = entry !== undefined && entry.until > now && entry.holders.has(token);
    const holders = entry !== undefined && entry.until > now ? entry.holders : new Set<string>();
    holders.add(token);
    this.closedConsumers.set(consumerId, { holders, until: now + holdMs });
    return held;
  }

  async reopenConsumer(consumerId: string, token: string): Promise<void> {
    const entry = this.closedConsumers.get(consumerId);
    entry?.holders.delete(token);
    if (entry && entry.holders.size === 0) this.closedConsumers.delete(consumerId);
  }

  /** An import bringing a live key into a consumer being deleted is refused whole, as the Redis store's script does. */
  private assertEnteredConsumersOpen(changed: readonly ApiKeyRecord[]): void {
    for (const record of changed) {
      const entered = consumerEntered(record, this.byId.get(record.id));
      if (entered === null) continue;
      try {
        this.assertConsumerOpen(entered);
      } catch (err) {
        if (err instanceof ConsumerClosed) throw closedConsumerConflict(record.id, entered);
        throw err;
      }
    }
  }

  /** A write that puts a key into a consumer being deleted throws ConsumerClosed; a hold that ran out is forgotten. */
  private assertConsumerOpen(consumerId: string | undefined): void {
    if (consumerId === undefined) return;
    const entry = this.closedConsumers.get(consumerId);
    if (entry === undefined) return;
    if (entry.until > Date.now()) throw new ConsumerClosed(consumerId);
    this.closedConsumers.delete(consumerId);
  }

  /** Throws when `keys.sqlite` cannot take a write now (the gateway's /readyz). */
  checkWrites(): void {
    this.assertOpen();
    this.writeProbe.check();
  }

  /** One statement on the file; a failure is counted, and one that passes becomes a 503. */
  private write<T>(run: () => T): T {
    return sqliteStatement(DATABASE, run, this.onSqliteError);
  }

  private remember(record: ApiKeyRecord): void {
    this.byId.set(record.id, record);
    for (const hash of hashesOf(record)) this.byHash.set(hash, record);
  }

  private assertOpen(): void {
    if (this.closed) throw new Error('key store is closed');
  }
}
