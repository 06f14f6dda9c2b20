import path from 'node:path';
import type { Migration } from '../shared/sqlite/sqlite-database';
import type { SqliteErrorListener } from '../shared/sqlite/sqlite-failures';
import { WRITE_PROBE_TABLE_SQL } from '../shared/sqlite/sqlite-write-probe';
import { RecordCopy } from '../shared/redis/record-copy';
import { decodeConsumer, encodeConsumer } from './consumer-record';
import type { ConsumerRecord } from './types';

const CONSUMER_MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    description: 'consumers: id and record JSON',
    up(db) {
      db.exec('CREATE TABLE IF NOT EXISTS consumers (id TEXT PRIMARY KEY, json TEXT NOT NULL) STRICT');
    },
  },
  {
    version: 2,
    description: "the write probe's row (/readyz), as every other file the gateway writes",
    up(db) {
      db.exec(WRITE_PROBE_TABLE_SQL);
    },
  },
];

/** How a table's file is opened: the settings every SQLite file of the gateway takes (config `storage`). */
export interface SqliteTableOptions {
  busyTimeoutMs?: number;
  onSqliteError?: SqliteErrorListener;
}

/**
 * Consumer records in one SQLite file (shared/redis/record-copy.ts: a Map in front, synchronous
 * FULL, failures counted and a full disk or a held lock a 503, the write probe of /readyz): the
 * in-process store's `consumers.sqlite`, and the durable copy of the Redis store's records
 * (durable-consumer-store.ts). `dataDir` null keeps them in memory only (tests).
 */
export function openConsumerTable(
  dataDir: string | null,
  fileName: string,
  options: SqliteTableOptions = {},
): RecordCopy<ConsumerRecord> {
  return new RecordCopy<ConsumerRecord>({
    file: dataDir === null ? ':memory:' : path.join(dataDir, fileName),
    table: 'consumers',
    migrations: CONSUMER_MIGRATIONS,
    codec: { encode: encodeConsumer, decode: decodeConsumer },
    busyTimeoutMs: options.busyTimeoutMs,
    database: fileName.replace(/\.sqlite$/, ''),
    onSqliteError: options.onSqliteError,
  });
}
