import { Counter, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/**
 * Time the inventory spends on one request, network excluded: a read is JSON plus one indexed
 * SQLite statement, well under a millisecond; a create waits for the WAL fsync (synchronous=FULL),
 * a few milliseconds; a statement waiting on another connection's lock can take up to the 5 s
 * busy_timeout.
 */
export const INVENTORY_HTTP_BUCKETS = [
  0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5,
];

/**
 * One prepared statement, from 10 µs to 1 s. SQLite answers in-process: a primary-key lookup from
 * a warm page cache took 5–7 µs and a 21-row page 25–50 µs on the 2-core dev machine, so the
 * usual millisecond buckets would put every read in the first one and hide a tenfold slowdown. An
 * INSERT commits with an fsync of the WAL (synchronous=FULL): 0.1–10 ms on an SSD, more on a busy
 * disk. Beyond 1 s is lock contention (busy_timeout is 5 s), where +Inf is precise enough.
 */
export const SQLITE_QUERY_BUCKETS = [
  0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1,
];

/** Fixed names of the repository's prepared statements: the only values the `statement` label takes. */
export const sqliteStatements = ['insert_pet', 'get_pet', 'list_pets', 'list_pets_by_status', 'ping'] as const;
export type SqliteStatement = (typeof sqliteStatements)[number];

export interface InventoryMetricsOptions {
  /**
   * Also collect prom-client's default process metrics. Only the standalone inventory does: the
   * embedded one shares its process with the gateway, which already reports them.
   */
  collectDefaults?: boolean;
}

/** The inventory's metrics, registered on `registry`, which its own listener serves at GET /metrics. */
export function createInventoryMetrics(registry: Registry, options: InventoryMetricsOptions = {}) {
  if (options.collectDefaults) collectDefaultMetrics({ register: registry });
  const sqliteQueryDuration = new Histogram({
    name: 'inventory_sqlite_query_duration_seconds',
    help: 'Time one prepared SQLite statement took, by statement name.',
    labelNames: ['statement'] as const,
    buckets: SQLITE_QUERY_BUCKETS,
    registers: [registry],
  });
  // Every statement shows up from the first scrape, with a count of 0 until it runs.
  for (const statement of sqliteStatements) sqliteQueryDuration.zero({ statement });
  return {
    registry,
    httpRequests: new Counter({
      name: 'inventory_http_requests_total',
      help: 'Requests answered by the inventory.',
      labelNames: ['method', 'route', 'status_code'] as const,
      registers: [registry],
    }),
    httpDuration: new Histogram({
      name: 'inventory_http_request_duration_seconds',
      help: 'Time from the inventory receiving a request to the end of its response.',
      labelNames: ['method', 'route', 'status_code'] as const,
      buckets: INVENTORY_HTTP_BUCKETS,
      registers: [registry],
    }),
    sqliteQueryDuration,
    // A failed statement by its SQLite code (SQLITE_FULL, SQLITE_READONLY, SQLITE_BUSY,
    // SQLITE_IOERR_WRITE, …); `write_probe` is /readyz's probe write. Both label sets are closed.
    sqliteErrors: sqliteErrorCounter(registry),
  };
}

export type InventoryMetrics = ReturnType<typeof createInventoryMetrics>;

/**
 * Failed statements by SQLite code. The write that matters most starts at 0 for a full disk, so
 * the series exists (and the SqliteWritesFailing alert's increase() can see its first failure)
 * before anything has gone wrong.
 */
function sqliteErrorCounter(registry: Registry) {
  const counter = new Counter({
    name: 'inventory_sqlite_errors_total',
    help: 'SQLite statements of the inventory that failed, by statement and SQLite result code.',
    labelNames: ['statement', 'code'] as const,
    registers: [registry],
  });
  counter.inc({ statement: 'insert_pet', code: 'SQLITE_FULL' }, 0);
  return counter;
}
