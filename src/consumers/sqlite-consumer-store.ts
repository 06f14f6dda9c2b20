import { Listeners } from '../shared/listeners';
import type { RecordCopy } from '../shared/redis/record-copy';
import { byCreation } from './consumer-record';
import { openConsumerTable, type SqliteTableOptions } from './sqlite-consumer-table';
import type { ConsumerRecord, ConsumerStore } from './types';

export const CONSUMERS_DATABASE_FILE = 'consumers.sqlite';

/** The in-process consumer store (no Redis): SQLite under dataDir, so a restart keeps them. */
export class SqliteConsumerStore implements ConsumerStore {
  private readonly table: RecordCopy<ConsumerRecord>;
  private readonly changes = new Listeners<[string]>();

  constructor(dataDir: string | null, options: SqliteTableOptions = {}) {
    this.table = openConsumerTable(dataDir, CONSUMERS_DATABASE_FILE, options);
  }

  /** Throws when `consumers.sqlite` cannot take a write now (the gateway's /readyz). */
  checkWrites(): void {
    this.table.checkWrites();
  }

  async list(): Promise<ConsumerRecord[]> {
    return this.table.all().sort(byCreation);
  }

  async get(id: string): Promise<ConsumerRecord | null> {
    return this.table.get(id);
  }

  async put(record: ConsumerRecord): Promise<void> {
    this.table.putAll([record]);
    this.changes.emit(record.id);
  }

  async putAll(records: readonly ConsumerRecord[]): Promise<void> {
    this.table.putAll(records);
    for (const record of records) this.changes.emit(record.id);
  }

  async delete(id: string): Promise<boolean> {
    const deleted = this.table.forget(id);
    if (deleted) this.changes.emit(id);
    return deleted;
  }

  onChange(listener: (id: string) => void): () => void {
    return this.changes.add(listener);
  }

  async close(): Promise<void> {
    this.changes.clear();
    this.table.close();
  }
}
