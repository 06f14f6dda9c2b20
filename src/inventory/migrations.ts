import type { Migration } from '../shared/sqlite/sqlite-database';

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
