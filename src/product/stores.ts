import { redisConfigured, type Config } from '../shared/config';
import type { Clock } from '../shared/clock';
import type { Logger } from '../shared/logger';
import { connectRedis, type RedisClient } from '../shared/redis/redis';
import { SqliteKeyStore, type KeyDurabilityMetrics, type KeyStore } from '../keys';
import type { KeyActivityStore } from '../usage/key-activity';
import type { UsagePeriodLedger } from '../usage/events/period-ledger';
import { RedisKeyActivityStore } from '../usage/redis-key-activity-store';
import { SqliteKeyActivityStore } from '../usage/sqlite-key-activity-store';
import { createLimiters, SqliteMonthLedger, type LimiterEvents, type Limiters, type MonthLedger } from '../limits';
import type { DeprecationUsageStore } from '../usage/deprecation-usage';
import { MemoryDeprecationUsageStore } from '../usage/memory-deprecation-usage-store';
import { RedisDeprecationUsageStore } from '../usage/redis-deprecation-usage-store';
import { RedisAuditLog, SqliteAuditLog, type AuditLog } from '../admin/audit-log';
import type { GatewayMetrics } from '../shared/metrics/metrics';
import { WriteReplication } from '../keys/durability/write-replication';
import type { Closers } from './closers';
import { openDurableRedisKeyStore } from './key-store';
import type { Outbox } from '../notifications/outbox';
import { RedisOutbox } from '../notifications/redis-outbox';
import { SqliteOutbox } from '../notifications/sqlite-outbox';
import { MemoryTopKeysStore, type TopKeysStore } from '../usage/top-keys';
import { RedisTopKeysStore } from '../usage/redis-top-keys-store';
import type { ConsumerStore } from '../consumers/types';
import { SqliteConsumerStore } from '../consumers/sqlite-consumer-store';
import { openDurableConsumerStore } from './consumer-store';

/** Everything the product keeps: on Redis for every instance, or in this process (SQLite under dataDir). */
export interface Stores {
  /** The Redis client, for what only Redis has (none in process). */
  redis: RedisClient | null;
  keyStore: KeyStore;
  /** Consumers (CONTRACT §4): Redis with a durable copy under dataDir, or SQLite in process. */
  consumerStore: ConsumerStore;
  limiters: Limiters;
  deprecationUsage: DeprecationUsageStore;
  /** Each key's usage history, and the per-period counts written in the same write (usage events read them). */
  keyActivity: KeyActivityStore & UsagePeriodLedger;
  /** Each key's requests per minute, for the busiest keys (GET /admin/stats/top-keys). */
  topKeys: TopKeysStore;
  /** Webhook events waiting for their receivers: Redis, so any instance delivers; SQLite in process. */
  webhookOutbox: Outbox;
  auditLog: AuditLog;
  /** Waits for a replica after an admin write (Redis only; null in process). */
  writeReplication: WriteReplication | null;
  /** The readiness check of the store: a Redis PING; in process there is nothing that can be away. */
  ping(): Promise<void>;
  /**
   * Each SQLite file this instance writes (in process all of them; with Redis the durable copies of
   * the keys and consumers), for /readyz: a probe write that fails while the disk is full, the file
   * system read-only or a lock held, and passes again by itself.
   */
  writableDatabases: WritableDatabase[];
}

/** A SQLite file this instance writes, and its /readyz check's name (docs/storage.md). */
export interface WritableDatabase {
  name: string;
  checkWrites(): void;
}

export interface StoreOptions {
  logger: Logger;
  clock: Clock;
  limiterEvents: Partial<LimiterEvents>;
  /** Counts what the durable copy of the key records restores (Redis only). */
  keyDurability: KeyDurabilityMetrics;
  /** The gateway's metrics: failed SQLite statements and audit entries dropped (in process only). */
  metrics: GatewayMetrics;
  closers: Closers;
  /** Config `rateLimit.leases` as in force now (reloadable; src/limits/leases/). */
  leases?(): Config['rateLimit']['leases'];
}

/** The one place that chooses between Redis (a server, a Cluster or Sentinel) and the in-process store. */
export async function startStores(config: Config, options: StoreOptions): Promise<Stores> {
  if (redisConfigured(config.redis)) return startRedisStores(config, options);
  options.logger.warn(
    'REDIS_URL is not set: using the in-process store. Limits, bans and keys are local to this one instance; do not run several.',
  );
  return startInProcessStores(config, options);
}

function limitersFor(
  config: Config,
  redis: RedisClient | null,
  options: StoreOptions,
  monthLedger?: MonthLedger,
): Limiters {
  return createLimiters({
    monthLedger,
    onMonthLedgerError: (err) =>
      options.logger.error(
        { err },
        'month windows could not be written to DATA_DIR; kept in memory and written with the next batch',
      ),
    redis,
    namespace: config.redis.namespace,
    ban: config.ban,
    minuteWindow: config.rateLimit.minuteWindow,
    anonymousPerMinute: config.anonymous.perMinute,
    clock: options.clock,
    failMode: config.store.failMode,
    commandTimeoutMs: config.redis.commandTimeoutMs,
    events: options.limiterEvents,
    leasesEnabled: options.leases && (() => options.leases!().enabled),
    leasesBusyRequestsPerSecond: options.leases && (() => options.leases!().busyRequestsPerSecond),
  });
}

async function startRedisStores(config: Config, options: StoreOptions): Promise<Stores> {
  const { closers, logger } = options;
  const namespace = config.redis.namespace;
  const redis = await connectRedis(config.redis);
  redis.on('error', (err: Error) => logger.warn({ err: err.message }, 'redis connection error'));
  closers.add(() => void redis.disconnect());
  const keys = await openDurableRedisKeyStore(redis, {
    namespace,
    dataDir: config.dataDir,
    logger,
    metrics: options.keyDurability,
    lossCheckSeconds: config.keys.lossCheckSeconds,
  });
  closers.add(() => keys.close());
  const consumerStore = await openDurableConsumerStore(redis, config, logger);
  closers.add(() => consumerStore.close());
  const writeReplication = await WriteReplication.open(redis, {
    namespace,
    waitMs: config.redis.replicationWaitMs,
    commandTimeoutMs: config.redis.commandTimeoutMs,
    replicaExpected: config.redis.sentinels.length > 0,
  });
  closers.add(() => writeReplication.close());
  const limiters = limitersFor(config, redis, options);
  closers.add(() => limiters.close());
  return {
    redis,
    keyStore: keys,
    consumerStore,
    writeReplication,
    limiters,
    deprecationUsage: new RedisDeprecationUsageStore(redis, namespace),
    keyActivity: new RedisKeyActivityStore(redis, namespace, options.clock),
    topKeys: new RedisTopKeysStore(redis, namespace),
    webhookOutbox: new RedisOutbox(redis, namespace),
    auditLog: new RedisAuditLog(redis, namespace),
    ping: async () => {
      await redis.ping();
    },
    // This instance's own files under DATA_DIR even with Redis: its durable copies (CONTRACT §4).
    writableDatabases: [
      { name: 'key copy database', checkWrites: () => keys.checkWrites() },
      { name: 'consumer copy database', checkWrites: () => consumerStore.checkWrites() },
    ],
  };
}

/** Keys, usage history, the audit trail and month windows in SQLite under dataDir, so a restart keeps them; minute and day windows in memory. */
function startInProcessStores(config: Config, options: StoreOptions): Stores {
  const { closers, metrics } = options;
  // How long a write waits for a lock, and each failed statement counted.
  const sqlite = {
    busyTimeoutMs: config.storage.busyTimeoutMs,
    onSqliteError: (database: string, code: string) => metrics.sqliteErrors.inc({ database, code }),
  };
  const keys = new SqliteKeyStore({ dataDir: config.dataDir, ...sqlite });
  closers.add(() => keys.close());
  const consumerStore = new SqliteConsumerStore(config.dataDir, sqlite);
  closers.add(() => consumerStore.close());
  // Month windows and credits survive a restart (CONTRACT §4); closed after the limiters, which write to it as they close.
  const months = new SqliteMonthLedger(config.dataDir, sqlite);
  closers.add(() => months.close());
  const limiters = limitersFor(config, null, options, months);
  closers.add(() => limiters.close());
  const keyActivity = new SqliteKeyActivityStore(config.dataDir, { ...sqlite, clock: options.clock });
  closers.add(() => keyActivity.close());
  const auditLog = new SqliteAuditLog(config.dataDir, {
    ...sqlite,
    onDropped: (entries) => metrics.auditDropped.inc(entries),
  });
  closers.add(() => auditLog.close());
  const webhookOutbox = new SqliteOutbox(config.dataDir, sqlite);
  closers.add(() => webhookOutbox.close());
  return {
    redis: null,
    keyStore: keys,
    consumerStore,
    limiters,
    deprecationUsage: new MemoryDeprecationUsageStore(),
    keyActivity,
    topKeys: new MemoryTopKeysStore(),
    webhookOutbox,
    auditLog,
    writeReplication: null,
    ping: async () => {},
    writableDatabases: [
      { name: 'keys database', checkWrites: () => keys.checkWrites() },
      { name: 'audit database', checkWrites: () => auditLog.checkWrites() },
      { name: 'key-usage database', checkWrites: () => keyActivity.checkWrites() },
      { name: 'months database', checkWrites: () => months.checkWrites() },
      { name: 'webhook-outbox database', checkWrites: () => webhookOutbox.checkWrites() },
      { name: 'consumers database', checkWrites: () => consumerStore.checkWrites() },
    ],
  };
}
