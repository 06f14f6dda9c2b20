import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { assertWritableDataDir, DEFAULT_SQLITE_BUSY_TIMEOUT_MS } from './sqlite-failures';

/** One schema step. `version` is what PRAGMA user_version reads once the step is applied. */
export interface Migration {
  version: number;
  description: string;
  up(db: Database.Database): void;
}

export interface MigrationResult {
  from: number;
  to: number;
}

/**
 * How a file is opened. Every file is WAL (readers go on during a write; a file whose filesystem
 * refuses WAL is refused, not silently opened in another mode) with one busy timeout; what differs
 * is said here, by each file, with its reason:
 * - `synchronous`: 'FULL' fsyncs the WAL on every commit, so what was acknowledged survives a power
 *   loss too (keys, month credits, the inventory's rows, the key replica). 'NORMAL' (better-sqlite3's
 *   WAL default) survives a crash of the process, not of the machine: for what is already written
 *   behind the answer in batches or kept in memory until written (activity, audit, outbox).
 * - `foreignKeys`: only the inventory declares any.
 */
export interface SqliteOpenOptions {
  /** A path, or ':memory:' (no directory, no WAL). */
  file: string;
  /** The schema, oldest first; append only (a released step is never edited). */
  migrations: readonly Migration[];
  synchronous: 'FULL' | 'NORMAL';
  busyTimeoutMs?: number;
  foreignKeys?: boolean;
  /** Refuse a read-only DATA_DIR up front with a clear error (stores the product cannot start without). */
  requireWritableDir?: boolean;
}

/**
 * The one way the product opens a SQLite file: the directory made, the pragmas set, the schema
 * brought up to date by `migrate`. The database is closed again when any of it fails.
 */
export function openSqliteDatabase(options: SqliteOpenOptions): Database.Database {
  const inMemory = options.file === ':memory:';
  if (!inMemory) {
    const dir = path.dirname(path.resolve(options.file));
    fs.mkdirSync(dir, { recursive: true });
    if (options.requireWritableDir) assertWritableDataDir(dir);
  }
  const db = new Database(options.file);
  const busyTimeoutMs = options.busyTimeoutMs ?? DEFAULT_SQLITE_BUSY_TIMEOUT_MS;
  try {
    // How long a write waits for another connection's lock before it fails with SQLITE_BUSY (503).
    db.pragma(`busy_timeout = ${busyTimeoutMs}`);
    if (!inMemory) {
      const journalMode = switchToWal(db, busyTimeoutMs);
      if (journalMode !== 'wal')
        throw new Error(`${options.file}: SQLite refused WAL mode (journal_mode is ${String(journalMode)})`);
    }
    db.pragma(`synchronous = ${options.synchronous}`);
    if (options.foreignKeys) db.pragma('foreign_keys = ON');
    migrate(db, options.migrations);
    return db;
  } catch (err) {
    db.close();
    throw err;
  }
}

const WAL_RETRY_PAUSE_MS = 10;

/**
 * `PRAGMA journal_mode = WAL`, retried while SQLite answers SQLITE_BUSY. Switching a new file's
 * journal mode takes its exclusive lock without calling the busy handler, so when processes open
 * the same new file at the same moment (the supervisor and its workers at a `WORKERS=2` start) one
 * of them is refused at once: "cannot start: database is locked" in a CI run; 92 of 1,200 opens when
 * four processes open 300 new files in step. A start is not the request path: a short synchronous
 * pause between tries, for as long as the busy timeout allows.
 */
function switchToWal(db: Database.Database, busyTimeoutMs: number): unknown {
  const deadline = Date.now() + busyTimeoutMs;
  for (;;) {
    try {
      return db.pragma('journal_mode = WAL', { simple: true });
    } catch (err) {
      if ((err as { code?: string }).code !== 'SQLITE_BUSY' || Date.now() >= deadline) throw err;
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, WAL_RETRY_PAUSE_MS);
    }
  }
}

/**
 * Brings the schema to the last version in one IMMEDIATE transaction: the write lock is taken
 * before user_version is read, so two processes opening the same file cannot both migrate, and a
 * crash mid-way leaves the previous version intact.
 *
 * Files written before their store had numbered migrations are at user_version 0 with some tables
 * and columns already there: such a store's steps are written to be harmless on them
 * (`CREATE TABLE IF NOT EXISTS`, `addColumnIfMissing`), so the old file is simply brought forward.
 */
export function migrate(db: Database.Database, steps: readonly Migration[]): MigrationResult {
  const latest = steps.at(-1)?.version ?? 0;
  const run = db.transaction((): MigrationResult => {
    const from = db.pragma('user_version', { simple: true }) as number;
    if (from > latest) {
      throw new Error(
        `database schema version ${from} is newer than this build knows (${latest}); refusing to open it`,
      );
    }
    for (const step of steps) {
      if (step.version <= from) continue;
      step.up(db);
      db.pragma(`user_version = ${step.version}`);
    }
    return { from, to: latest };
  });
  return run.immediate();
}

/** ALTER TABLE … ADD COLUMN, unless a file made before its store's migrations already has it. */
export function addColumnIfMissing(db: Database.Database, table: string, column: string, definition: string): void {
  const present = (db.pragma(`table_info(${table})`) as Array<{ name: string }>).some((c) => c.name === column);
  if (!present) db.exec(`ALTER TABLE ${table} ADD COLUMN ${column} ${definition}`);
}
