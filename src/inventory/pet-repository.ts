import type Database from 'better-sqlite3';
import type { Clock } from '../shared/clock';
import { sqliteStatement } from '../shared/sqlite/sqlite-failures';
import { SqliteWriteProbe } from '../shared/sqlite/sqlite-write-probe';
import { tracing } from '../shared/telemetry/telemetry';
import type { InventoryMetrics, SqliteStatement } from './metrics';
import type { NewPet, Pet, PetStatus } from './pet';

export interface ListPetsQuery {
  /** Only pets with an id greater than this; 0 starts from the first. */
  afterId: number;
  limit: number;
  status?: PetStatus;
}

/** Where pets live. Synchronous: SQLite answers in-process, and a commit is done when a call returns. */
export interface PetRepository {
  /**
   * Inserts and commits; the returned pet is durable. A write the database cannot make for now
   * (disk full, read-only, locked, I/O error) throws StorageUnavailableError and stores nothing.
   */
  create(pet: NewPet): Pet;
  findById(id: number): Pet | null;
  /** Pets ordered by id ascending, starting after `afterId`. */
  list(query: ListPetsQuery): Pet[];
  /** Throws when the database does not answer. */
  ping(): void;
  /** Throws when the database cannot take a write now (a probe write; see SqliteWriteProbe). */
  checkWrites(): void;
  close(): void;
}

const petColumns = 'id, name, category_id AS categoryId, status';

/**
 * Where the time of each statement goes (`inventory_sqlite_query_duration_seconds`), and each
 * failed one (`inventory_sqlite_errors_total`), in production.
 */
export type QueryTimings = Pick<InventoryMetrics, 'sqliteQueryDuration'> &
  Partial<Pick<InventoryMetrics, 'sqliteErrors'>>;

/** The inventory database's name in errors and /readyz. */
const DATABASE = 'inventory';

/**
 * A PetRepository over better-sqlite3; every statement is prepared once, here. With `metrics`,
 * each statement's run is timed under its fixed name (never its SQL or values).
 */
export class SqlitePetRepository implements PetRepository {
  private readonly insertPet: Database.Statement<[string, number, PetStatus, string]>;
  private readonly selectById: Database.Statement<[number], Pet>;
  private readonly selectPage: Database.Statement<[number, number], Pet>;
  private readonly selectPageByStatus: Database.Statement<[PetStatus, number, number], Pet>;
  private readonly selectOne: Database.Statement<[], { ok: number }>;
  private readonly writeProbe: SqliteWriteProbe;
  /** With tracing on, each statement is a span under the request's (null: off). */
  private readonly traces = tracing();

  constructor(
    private readonly db: Database.Database,
    private readonly clock: Clock,
    private readonly metrics?: QueryTimings,
  ) {
    // No RETURNING: stepped once by get(), an INSERT … RETURNING makes its change but commits only
    // when the statement completes, and get() resets it after the first row without reporting a
    // failed commit (SQLITE_FULL): the row came back, was never stored, and its id was handed out
    // again. run() steps to the end and throws whatever the commit returned.
    this.insertPet = db.prepare('INSERT INTO pets (name, category_id, status, created_at) VALUES (?, ?, ?, ?)');
    this.selectById = db.prepare(`SELECT ${petColumns} FROM pets WHERE id = ?`);
    this.selectPage = db.prepare(`SELECT ${petColumns} FROM pets WHERE id > ? ORDER BY id LIMIT ?`);
    this.selectPageByStatus = db.prepare(
      `SELECT ${petColumns} FROM pets WHERE status = ? AND id > ? ORDER BY id LIMIT ?`,
    );
    this.selectOne = db.prepare('SELECT 1 AS ok');
    this.writeProbe = new SqliteWriteProbe(db, DATABASE, clock, (_database, code) =>
      this.metrics?.sqliteErrors?.inc({ statement: 'write_probe', code }),
    );
  }

  create(pet: NewPet): Pet {
    const createdAt = new Date(this.clock.now()).toISOString();
    // Outside an explicit transaction the INSERT autocommits: by the time run() returns, the row
    // and its fsync'd WAL frame are on disk, and a commit that failed has thrown. The pet is what was
    // bound plus the rowid; AUTOINCREMENT never hands out a committed id again.
    const { lastInsertRowid } = this.timed('insert_pet', () =>
      this.insertPet.run(pet.name, pet.categoryId, pet.status, createdAt),
    );
    return { id: Number(lastInsertRowid), name: pet.name, categoryId: pet.categoryId, status: pet.status };
  }

  findById(id: number): Pet | null {
    return this.timed('get_pet', () => this.selectById.get(id)) ?? null;
  }

  list({ afterId, limit, status }: ListPetsQuery): Pet[] {
    return status === undefined
      ? this.timed('list_pets', () => this.selectPage.all(afterId, limit))
      : this.timed('list_pets_by_status', () => this.selectPageByStatus.all(status, afterId, limit));
  }

  ping(): void {
    if (this.timed('ping', () => this.selectOne.get())?.ok !== 1) throw new Error('SELECT 1 did not answer 1');
  }

  checkWrites(): void {
    this.writeProbe.check();
  }

  close(): void {
    if (this.db.open) this.db.close();
  }

  /**
   * Runs one statement and records its time, failed runs included (a statement that gave up after
   * the busy timeout is the slowest of all). better-sqlite3 is synchronous, so two hrtime reads
   * around the call measure exactly the statement.
   */
  private timed<T>(statement: SqliteStatement, run: () => T): T {
    const counted = () =>
      sqliteStatement(DATABASE, run, (_database, code) => this.metrics?.sqliteErrors?.inc({ statement, code }));
    return this.traces
      ? this.traces.sqliteStatement(statement, () => this.measured(statement, counted))
      : this.measured(statement, counted);
  }

  private measured<T>(statement: SqliteStatement, run: () => T): T {
    if (!this.metrics) return run();
    const startedAt = process.hrtime.bigint();
    try {
      return run();
    } finally {
      this.metrics.sqliteQueryDuration.observe({ statement }, Number(process.hrtime.bigint() - startedAt) / 1e9);
    }
  }
}
