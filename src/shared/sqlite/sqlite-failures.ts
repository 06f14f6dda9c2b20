import fs from 'node:fs';
import { ApiError } from '../errors';

/** Seconds a client is told to wait after a write the database could not make (Retry-After). */
export const STORAGE_RETRY_AFTER_SECONDS = 5;

/** How long a statement waits for another connection's write lock before failing with SQLITE_BUSY (config `storage.busyTimeoutMs`). */
export const DEFAULT_SQLITE_BUSY_TIMEOUT_MS = 5000;

/**
 * Primary result codes of a database that cannot take a write for now: disk full, read-only file
 * system (or a database opened read-only), a lock held past the busy timeout, an I/O error, a file
 * that cannot be opened, no memory. Each passes once its cause is gone, so the write is refused
 * with 503 and may be retried. Anything else (a constraint, a corrupt file) is a bug or damage: 500.
 */
const UNAVAILABLE_PRIMARY_CODES = new Set([
  'SQLITE_FULL',
  'SQLITE_READONLY',
  'SQLITE_BUSY',
  'SQLITE_LOCKED',
  'SQLITE_IOERR',
  'SQLITE_CANTOPEN',
  'SQLITE_PROTOCOL',
  'SQLITE_NOMEM',
  'SQLITE_NOLFS',
]);

/**
 * The SQLite result code of an error thrown by better-sqlite3 (e.g. `SQLITE_IOERR_WRITE`), else
 * null. Read from the error's `code` rather than by `instanceof SqliteError`, so that no module
 * needs better-sqlite3's class at run time just to classify.
 */
export function sqliteCodeOf(err: unknown): string | null {
  // By name, not `instanceof Error`: better-sqlite3's native binding keeps the SqliteError class of
  // the first copy of the module loaded in the process, whose Error may be another realm's (jest
  // loads a module registry per test file into one worker), and then the check missed a SQLITE_FULL.
  if (typeof err !== 'object' || err === null || (err as { name?: unknown }).name !== 'SqliteError') return null;
  const code = (err as Error & { code?: unknown }).code;
  return typeof code === 'string' && code.startsWith('SQLITE_') ? code : null;
}

/** `SQLITE_IOERR_WRITE` → `SQLITE_IOERR`. */
function primaryCode(code: string): string {
  return /^SQLITE_[A-Z]+/.exec(code)?.[0] ?? code;
}

/**
 * A write the database could not make, for a cause that passes (see UNAVAILABLE_PRIMARY_CODES).
 * Nothing was stored. An ApiError, so every listener answers it 503 `service_unavailable` with a
 * Retry-After; the message names no file and no SQLite detail (those go to the log and metrics).
 */
export class StorageUnavailableError extends ApiError {
  constructor(
    /** Which database: `inventory`, `keys`, `audit`, `key-usage`. */
    readonly database: string,
    /** The SQLite result code, e.g. `SQLITE_FULL`. */
    readonly sqliteCode: string,
    readonly detail: string,
  ) {
    super('service_unavailable', 'The write could not be stored and was not made. Try again later.', {
      'Retry-After': String(STORAGE_RETRY_AFTER_SECONDS),
    });
    this.name = 'StorageUnavailableError';
  }
}

/** Called with the database's name and the SQLite code of each failed statement (the metrics). */
export type SqliteErrorListener = (database: string, code: string) => void;

/**
 * Runs one SQLite statement or transaction of `database`. A SQLite failure is reported to
 * `onError` and, when its cause passes, rethrown as StorageUnavailableError; anything else is
 * rethrown as it is. Synchronous like better-sqlite3: when it returns, the commit is done.
 */
export function sqliteStatement<T>(database: string, run: () => T, onError?: SqliteErrorListener): T {
  try {
    return run();
  } catch (err) {
    const code = sqliteCodeOf(err);
    if (code === null) throw err;
    onError?.(database, code);
    if (UNAVAILABLE_PRIMARY_CODES.has(primaryCode(code)))
      throw new StorageUnavailableError(database, code, (err as Error).message);
    throw err;
  }
}

/** For /readyz and logs: `SQLITE_FULL: database or disk is full`, or the error's message. */
export function describeWriteFailure(err: unknown): string {
  if (err instanceof StorageUnavailableError) return `${err.sqliteCode}: ${err.detail}`;
  const code = sqliteCodeOf(err);
  const message = err instanceof Error ? err.message : String(err);
  return code ? `${code}: ${message}` : message;
}

/** The data directory is on a read-only file system at startup: said in one line, exit 1. */
export class ReadOnlyDataDirError extends Error {
  constructor(readonly dir: string) {
    super(
      `DATA_DIR ${dir} is on a read-only file system: its SQLite files cannot take writes. Remount it read-write (or point DATA_DIR elsewhere) and start again.`,
    );
    this.name = 'ReadOnlyDataDirError';
  }
}

/**
 * Refuses to start on a read-only file system. SQLite would open the database read-only and serve
 * reads, but that connection stays read-only after a remount, so writes could never resume without
 * a restart; refusing lets the supervisor restart the process until the file system is writable.
 * (A full disk or a held lock is no reason to refuse: those pass while the process runs.)
 */
export function assertWritableDataDir(dir: string): void {
  try {
    fs.accessSync(dir, fs.constants.W_OK);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EROFS') throw new ReadOnlyDataDirError(dir);
  }
}
