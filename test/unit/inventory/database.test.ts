import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { ManualClock } from '../../../src/shared/clock';
import { openInventoryDatabase } from '../../../src/inventory/database';
import { migrations } from '../../../src/inventory/migrations';
import { migrate, type Migration } from '../../../src/shared/sqlite/sqlite-database';
import { SqlitePetRepository } from '../../../src/inventory/pet-repository';
import { makeTempDir } from '../../support/inventory-harness';

describe('openInventoryDatabase', () => {
  let dir: string;
  beforeEach(() => {
    dir = makeTempDir('inventory-db');
  });
  afterEach(() => {
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('creates the file (and its directory) in WAL mode with synchronous=FULL and a busy timeout', () => {
    const db = openInventoryDatabase(path.join(dir, 'nested', 'inventory.sqlite'));
    try {
      expect(db.pragma('journal_mode', { simple: true })).toBe('wal');
      expect(db.pragma('synchronous', { simple: true })).toBe(2);
      expect(db.pragma('busy_timeout', { simple: true })).toBeGreaterThan(0);
      expect(db.pragma('user_version', { simple: true })).toBe(migrations.at(-1)!.version);
    } finally {
      db.close();
    }
  });

  it('migrates once: reopening keeps the data and the version', () => {
    const file = path.join(dir, 'inventory.sqlite');
    const first = openInventoryDatabase(file);
    new SqlitePetRepository(first, new ManualClock()).create({ name: 'Rex', categoryId: 1, status: 'available' });
    first.close();
    const second = openInventoryDatabase(file);
    try {
      expect(migrate(second, migrations)).toEqual({ from: migrations.at(-1)!.version, to: migrations.at(-1)!.version });
      expect(new SqlitePetRepository(second, new ManualClock()).findById(1)?.name).toBe('Rex');
    } finally {
      second.close();
    }
  });

  it('refuses a database whose schema is newer than this build', () => {
    const file = path.join(dir, 'future.sqlite');
    const raw = new Database(file);
    raw.pragma('user_version = 999');
    raw.close();
    expect(() => openInventoryDatabase(file)).toThrow(/newer than this build/);
  });

  it('applies steps in one transaction: a failing step leaves the previous version and no partial schema', () => {
    const db = new Database(path.join(dir, 'partial.sqlite'));
    try {
      const steps: Migration[] = [
        ...migrations,
        {
          version: migrations.at(-1)!.version + 1,
          description: 'fails half way',
          up(d) {
            d.exec('CREATE TABLE half_done (x INTEGER)');
            throw new Error('boom');
          },
        },
      ];
      expect(() => migrate(db, steps)).toThrow('boom');
      expect(db.pragma('user_version', { simple: true })).toBe(0);
      expect(db.prepare("SELECT count(*) AS n FROM sqlite_master WHERE name IN ('pets', 'half_done')").get()).toEqual({
        n: 0,
      });
    } finally {
      db.close();
    }
  });
});

describe('SqlitePetRepository', () => {
  let dir: string;
  let db: Database.Database;
  let repository: SqlitePetRepository;
  const clock = new ManualClock(Date.UTC(2026, 4, 1));

  beforeEach(() => {
    dir = makeTempDir('inventory-repo');
    db = openInventoryDatabase(path.join(dir, 'inventory.sqlite'));
    repository = new SqlitePetRepository(db, clock);
  });
  afterEach(() => {
    repository.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('creates pets with increasing ids and records created_at from the clock', () => {
    const a = repository.create({ name: 'A', categoryId: 1, status: 'available' });
    const b = repository.create({ name: 'B', categoryId: 2, status: 'sold' });
    expect(a).toEqual({ id: 1, name: 'A', categoryId: 1, status: 'available' });
    expect(b.id).toBe(2);
    expect(db.prepare('SELECT created_at FROM pets WHERE id = 1').get()).toEqual({
      created_at: '2026-05-01T00:00:00.000Z',
    });
  });

  it('never reuses an id, even after the highest row is deleted', () => {
    repository.create({ name: 'A', categoryId: 1, status: 'available' });
    const b = repository.create({ name: 'B', categoryId: 1, status: 'available' });
    db.prepare('DELETE FROM pets WHERE id = ?').run(b.id);
    expect(repository.create({ name: 'C', categoryId: 1, status: 'available' }).id).toBe(b.id + 1);
  });

  it('lists after an id, in id order, optionally by status', () => {
    const statuses = ['available', 'sold', 'sold', 'pending', 'sold'] as const;
    statuses.forEach((status, i) => repository.create({ name: `P${i}`, categoryId: 1, status }));
    expect(repository.list({ afterId: 0, limit: 10 }).map((p) => p.id)).toEqual([1, 2, 3, 4, 5]);
    expect(repository.list({ afterId: 2, limit: 2 }).map((p) => p.id)).toEqual([3, 4]);
    expect(repository.list({ afterId: 0, limit: 10, status: 'sold' }).map((p) => p.id)).toEqual([2, 3, 5]);
    expect(repository.list({ afterId: 3, limit: 10, status: 'sold' }).map((p) => p.id)).toEqual([5]);
  });

  it('uses the (status, id) index for a filtered page', () => {
    const plan = db
      .prepare("EXPLAIN QUERY PLAN SELECT id FROM pets WHERE status = 'sold' AND id > 5 ORDER BY id LIMIT 10")
      .all() as { detail: string }[];
    expect(plan.map((row) => row.detail).join(' ')).toContain('pets_status_id');
  });

  it('enforces the schema constraints even for a caller that skipped validation', () => {
    expect(() => repository.create({ name: '', categoryId: 1, status: 'available' })).toThrow(/CHECK/);
    expect(() => repository.create({ name: 'a', categoryId: 0, status: 'available' })).toThrow(/CHECK/);
    expect(() => repository.create({ name: 'a', categoryId: 1, status: 'lost' as never })).toThrow(/CHECK/);
  });

  it('ping answers while open and throws once closed', () => {
    expect(() => repository.ping()).not.toThrow();
    repository.close();
    expect(() => repository.ping()).toThrow();
  });
});
