import type Database from 'better-sqlite3';

/** One schema step. `version` is what PRAGMA user_version reads once the step is applied. */
export interface Migration {
  version: number;
  description: string;
  up(db: Database.Database): void;
}

/**
 * The schema, oldest first. Append only: a released step is never edited, because databases in
 * the field already carry its version number.
 */
export const migrations: readonly Migration[] = [
  {
    version: 1,
    description: 'pets table; ids from AUTOINCREMENT so a deleted id is never handed out again',
    up(db) {
      db.exec(`
        CREATE TABLE pets (
          id INTEGER PRIMARY KEY AUTOINCREMENT,
          name TEXT NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
          category_id INTEGER NOT NULL CHECK (category_id >= 1),
          status TEXT NOT NULL DEFAULT 'available' CHECK (status IN ('available', 'pending', 'sold')),
          created_at TEXT NOT NULL
        ) STRICT;
        -- Keyset pages filtered by status: WHERE status = ? AND id > ? ORDER BY id.
        CREATE INDEX pets_status_id ON pets (status, id);
      `);
    },
  },
  {
    version: 2,
    description: 'write_probe: one row that /readyz rewrites to learn whether the database takes writes',
    up(db) {
      db.exec('CREATE TABLE write_probe (id INTEGER PRIMARY KEY CHECK (id = 1), at TEXT NOT NULL) STRICT');
    },
  },
];

export interface MigrationResult {
  from: number;
  to: number;
}

/**
 * Brings the schema to the last version in one IMMEDIATE transaction: the write lock is taken
 * before user_version is read, so two processes opening the same file cannot both migrate, and a
 * crash mid-way leaves the previous version intact.
 */
export function migrate(db: Database.Database, steps: readonly Migration[] = migrations): MigrationResult {
  const latest = steps.at(-1)?.version ?? 0;
  const run = db.transaction((): MigrationResult => {
    const from = db.pragma('user_version', { simple: true }) as number;
    if (from > latest) {
      throw new Error(`database schema version ${from} is newer than this build knows (${latest}); refusing to open it`);
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
