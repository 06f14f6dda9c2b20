import type Database from 'better-sqlite3';
import { DEFAULT_SQLITE_BUSY_TIMEOUT_MS } from '../shared/sqlite/sqlite-failures';
import { openSqliteDatabase } from '../shared/sqlite/sqlite-database';
import { migrations } from './migrations';

/**
 * Opens (creating if needed) the inventory database and brings its schema up to date.
 *
 * synchronous=FULL: a row acknowledged with 201 survives a crash of the process and of the machine.
 */
export function openInventoryDatabase(file: string, busyTimeoutMs = DEFAULT_SQLITE_BUSY_TIMEOUT_MS): Database.Database {
  return openSqliteDatabase({
    file,
    migrations,
    synchronous: 'FULL',
    busyTimeoutMs,
    foreignKeys: true,
    requireWritableDir: true,
  });
}
