import type Database from 'better-sqlite3';
import type { Clock } from '../shared/clock';
import { tracing } from '../shared/telemetry';
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
  /** Inserts and commits; the returned pet is durable. */
  create(pet: NewPet): Pet;
  findById(id: number): Pet | null;
  /** Pets ordered by id ascending, starting after `afterId`. */
  list(query: ListPetsQuery): Pet[];
  /** Throws when the database does not answer. */
  ping(): void;
  close(): void;
}

const petColumns = 'id, name, category_id AS categoryId, status';

/** Where the time of each statement goes; `inventory_sqlite_query_duration_seconds` in production. */
export type QueryTimings = Pick<InventoryMetrics, 'sqliteQueryDuration'>;

/**
 * A PetRepository over better-sqlite3; every statement is prepared once, here. With `metrics`,
 * each statement's run is timed under its fixed name (never its SQL or values).
 */
export class SqlitePetRepository implements PetRepository {
  private readonly insertPet: Database.Statement<[string, number, PetStatus, string], Pet>;
  private readonly selectById: Database.Statement<[number], Pet>;
  private readonly selectPage: Database.Statement<[number, number], Pet>;
  private readonly selectPageByStatus: Database.Statement<[PetStatus, number, number], Pet>;
  private readonly selectOne: Database.Statement<[], { ok: number }>;
  /** With tracing on, each statement is a span under the request's (null: off). */
  private readonly traces = tracing();

  constructor(
    private readonly db: Database.Database,
    private readonly clock: Clock,
    private readonly metrics?: QueryTimings,
  ) {
    this.insertPet = db.prepare(
      `INSERT INTO pets (name, category_id, status, created_at) VALUES (?, ?, ?, ?) RETURNING ${petColumns}`,
    );
    this.selectById = db.prepare(`SELECT ${petColumns} FROM pets WHERE id = ?`);
    this.selectPage = db.prepare(`SELECT ${petColumns} FROM pets WHERE id > ? ORDER BY id LIMIT ?`);
    this.selectPageByStatus = db.prepare(
      `SELECT ${petColumns} FROM pets WHERE status = ? AND id > ? ORDER BY id LIMIT ?`,
    );
    this.selectOne = db.prepare('SELECT 1 AS ok');
  }

  create(pet: NewPet): Pet {
    const createdAt = new Date(this.clock.now()).toISOString();
    // Outside an explicit transaction the INSERT autocommits: by the time get() returns, the row
    // and its fsync'd WAL frame are on disk.
    const row = this.timed('insert_pet', () => this.insertPet.get(pet.name, pet.categoryId, pet.status, createdAt));
    if (!row) throw new Error('INSERT … RETURNING returned no row');
    return row;
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

  close(): void {
    if (this.db.open) this.db.close();
  }

  /**
   * Runs one statement and records its time, failed runs included (a statement that gave up after
   * the busy timeout is the slowest of all). better-sqlite3 is synchronous, so two hrtime reads
   * around the call measure exactly the statement.
   */
  private timed<T>(statement: SqliteStatement, run: () => T): T {
    return this.traces ? this.traces.sqliteStatement(statement, () => this.measured(statement, run)) : this.measured(statement, run);
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
