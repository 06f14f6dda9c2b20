import cluster from 'node:cluster';
import type { RedisClient } from '../shared/redis';
import { RedisKeyStore } from './redis-key-store';
import type { KeyStore } from './types';
import type { Logger } from '../shared/logger';
import { DurableKeyStore } from './durable-key-store';
import { checkRedisDurability } from './redis-durability-check';
import { KeyReplica } from './key-replica';
import { KeyLossMonitor, type DataLossEvent } from './key-loss-monitor';
import type { KeyDurabilityMetrics } from './key-durability-metrics';

export * from './types';
export * from './key-format';
export { ImportLineError, NDJSON_CONTENT_TYPE, parseExport, exportLine } from './key-export';
export { withoutHash, type PublicKeyRecord } from './record';
export { SqliteKeyStore, KEYS_DATABASE_FILE, type SqliteKeyStoreOptions } from './sqlite-key-store';
export { RedisKeyStore, redisKeyLayout, type RedisKeyStoreOptions } from './redis-key-store';
export { keyStatusAt } from './key-status';
export { KeyService, DEFAULT_GRACE_SECONDS, MAX_GRACE_SECONDS, MAX_NAME_LENGTH, type CreatedKey, type KeyServiceOptions } from './key-service';
export { createKeyDurabilityMetrics, type KeyDurabilityMetrics } from './key-durability-metrics';
export { KeyResolver, DEFAULT_MAX_CACHE_ENTRIES, type KeyResolution, type KeyResolverOptions } from './key-resolver';

export interface DurableKeyStoreSettings {
  /** Config `redis.namespace`. */
  namespace: string;
  /** Config `dataDir`: where this instance keeps its durable copy of the key records. */
  dataDir: string;
  logger: Logger;
  metrics: KeyDurabilityMetrics;
  /** Config `keys.lossCheckSeconds`. */
  lossCheckSeconds: number;
}

/** The error line of a restore: what was lost and what was put back, by id (never a key or hash). */
function reportDataLoss(logger: Logger, metrics: KeyDurabilityMetrics, event: DataLossEvent): void {
  metrics.dataLoss.inc({ reason: event.reason });
  metrics.restoredRecords.inc(event.restoredIds.length);
  logger.error(
    { event: 'store_data_loss', reason: event.reason, knownKeyRecords: event.known, foundInRedis: event.foundInRedis, restored: event.restoredIds.length, restoredIds: event.restoredIds.slice(0, 50) },
    `Redis lost key records (${event.reason === 'marker_missing' ? 'it came back empty: restart without persistence, FLUSHALL or a failover to an empty replica' : 'some records are gone: a failover to a replica that missed writes?'}); ` +
      `restored ${event.restoredIds.length} of ${event.known} known key records from DATA_DIR. Windows and bans restarted from zero. See docs/runbook.md#gatewaystoredataloss`,
  );
}

/**
 * The key store on Redis, with a durable copy of its records under dataDir that puts them back
 * when Redis loses them (CONTRACT §4: keys are credentials). Subscribed to changes and checked by
 * the time this resolves. The caller closes it; the Redis client itself stays the caller's.
 */
export async function openDurableRedisKeyStore(redis: RedisClient, settings: DurableKeyStoreSettings): Promise<KeyStore> {
  const redisStore = await RedisKeyStore.open(redis, { namespace: settings.namespace });
  const { logger, metrics } = settings;
  const replica = new KeyReplica(settings.dataDir, settings.namespace);
  const monitor = new KeyLossMonitor(redisStore, replica, {
    intervalMs: settings.lossCheckSeconds * 1000,
    onDataLoss: (event) => reportDataLoss(logger, metrics, event),
    onCheckFailed: (err) => logger.warn({ err: (err as Error).message }, 'could not check Redis for lost key records; retrying'),
  });
  const store = new DurableKeyStore(redisStore, replica, monitor, (err) => logger.warn({ err: (err as Error).message }, 'could not copy key records to DATA_DIR'));
  await store.start();
  // Once per process; under WORKERS every worker would say it again.
  if (!cluster.worker || cluster.worker.id === 1) await checkRedisDurability(redis, logger, metrics.dataAtRisk);
  return store;
}
