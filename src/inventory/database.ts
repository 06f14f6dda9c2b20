import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { assertWritableDataDir, DEFAULT_SQLITE_BUSY_TIMEOUT_MS } from '../shared/sqlite-failures';
import { migrate } from './migrations';

/**
 * Opens (creating if needed) the inventory database and brings its schema up to date.
 *
 * WAL lets readers proceed during a write; synchronous=FULL fsyncs the WAL on every commit, so a
 * row acknowledged with 201 survives a crash of the process and of the machine.
 */
export function openInventoryDatabase(file: string, busyTimeoutMs = DEFAULT_SQLITE_BUSY_TIMEOUT_MS): Database.Database {
  fs.mkdirSync(path.dirname(path.resolve(file)), { recursive: true });
  assertWritableDataDir(path.dirname(path.resolve(file)));
  const db = new Database(file);
  try {
    const journalMode = db.pragma('journal_mode = WAL', { simple: true });
    if (journalMode !== 'wal') throw new Error(`${file}: SQLite refused WAL mode (journal_mode is ${String(journalMode)})`);
    db.pragma('synchronous = FULL');
    // How long a write waits for another connection's lock before it fails with SQLITE_BUSY (503).
    db.pragma(`busy_timeout = ${busyTimeoutMs}`);
    db.pragma('foreign_keys = ON');
    migrate(db);
    return db;
  } catch (err) {
    db.close();
    throw err;
  }
}
