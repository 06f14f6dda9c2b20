import type Database from 'better-sqlite3';
import { systemClock } from '../clock';
import { openSqliteDatabase, type Migration } from '../sqlite/sqlite-database';
import { sqliteStatement, type SqliteErrorListener } from '../sqlite/sqlite-failures';
import { SqliteWriteProbe } from '../sqlite/sqlite-write-probe';

/** How a record is written to its table's `json` column and read back. */
export interface RecordCodec<R> {
  encode(record: R): string;
  decode(json: string): R;
}

export interface RecordCopyOptions<R> {
  /** The SQLite file; ':memory:' keeps the records in memory only (tests). */
  file: string;
  /** Its table of `(id TEXT PRIMARY KEY, json TEXT NOT NULL)`, created by `migrations`. */
  table: string;
  migrations: readonly Migration[];
  codec: RecordCodec<R>;
  /** Config `storage.busyTimeoutMs`; SQLite's default of the gateway when absent. */
  busyTimeoutMs?: number;
  /**
   * The database's name in errors, metrics and /readyz: given, each write counts its failures to
   * `onSqliteError` and a full disk or a held lock becomes a 503 (StorageUnavailableError), and
   * `checkWrites` probes the file (its migrations create the write probe's table).
   */
  database?: string;
  onSqliteError?: SqliteErrorListener;
  /** Told of each record kept (with the one it replaced) and each forgotten: indexes beside the Map. */
  onKept?(record: R, before: R | undefined): void;
  onForgotten?(record: R): void;
}

/**
 * Records by id in one SQLite file (synchronous FULL: what answers once Redis lost them survives
 * a power loss too), and in a Map so a read costs no I/O. The durable copy of what Redis keeps
 * (keys and consumers alike, with `LossCheck` beside it), and the in-process consumer store's
 * storage. Workers of one instance share a file (WAL, busy timeout); each keeps its own Map.
 */
export class RecordCopy<R extends { id: string }> {
  private readonly byId = new Map<string, { record: R; json: string }>();
  private readonly db: Database.Database;
  private readonly upsert: Database.Statement<[string, string]>;
  private readonly remove: Database.Statement<[string]>;
  private readonly writeProbe: SqliteWriteProbe | null;

  constructor(private readonly options: RecordCopyOptions<R>) {
    const { table } = options;
    this.db = openSqliteDatabase({
      file: options.file,
      migrations: options.migrations,
      synchronous: 'FULL',
      busyTimeoutMs: options.busyTimeoutMs,
    });
    try {
      this.writeProbe = options.database
        ? new SqliteWriteProbe(this.db, options.database, systemClock, options.onSqliteError)
        : null;
      this.upsert = this.db.prepare(
        `INSERT INTO ${table} (id, json) VALUES (?, ?) ON CONFLICT(id) DO UPDATE SET json = excluded.json`,
      );
      this.remove = this.db.prepare(`DELETE FROM ${table} WHERE id = ?`);
      for (const row of this.db.prepare(`SELECT json FROM ${table}`).all() as Array<{ json: string }>)
        this.remember(options.codec.decode(row.json), row.json);
    } catch (err) {
      this.db.close();
      throw err;
    }
  }

  /** Keeps these records in one transaction; records already held as they are cost no write. */
  putAll(records: readonly R[]): void {
    const changed = records
      .map((record) => ({ record, json: this.options.codec.encode(record) }))
      .filter(({ record, json }) => this.byId.get(record.id)?.json !== json);
    if (changed.length === 0) return;
    this.write(() =>
      this.db.transaction(() => {
        for (const { record, json } of changed) this.upsert.run(record.id, json);
      })(),
    );
    for (const { record, json } of changed) this.remember(record, json);
  }

  put(record: R): void {
    this.putAll([record]);
  }

  /** Drops a record that no longer exists anywhere; false when none was held. */
  forget(id: string): boolean {
    const before = this.byId.get(id);
    if (!before) return false;
    this.write(() => this.remove.run(id));
    this.byId.delete(id);
    this.options.onForgotten?.(before.record);
    return true;
  }

  get(id: string): R | null {
    return this.byId.get(id)?.record ?? null;
  }

  all(): R[] {
    return [...this.byId.values()].map((entry) => entry.record);
  }

  get size(): number {
    return this.byId.size;
  }

  /** Throws when the file cannot take a write now (the gateway's /readyz); only with `database`. */
  checkWrites(): void {
    this.writeProbe?.check();
  }

  close(): void {
    if (this.db.open) this.db.close();
  }

  private write<T>(run: () => T): T {
    const { database } = this.options;
    return database ? sqliteStatement(database, run, this.options.onSqliteError) : run();
  }

  private remember(record: R, json: string): void {
    const before = this.byId.get(record.id)?.record;
    this.byId.set(record.id, { record, json });
    this.options.onKept?.(record, before);
  }
}
