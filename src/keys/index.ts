import cluster from 'node:cluster';
import type { RedisClient } from '../shared/redis';
import { MemoryKeyStore } from './memory-key-store';
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
export { MemoryKeyStore, KEYS_DATABASE_FILE, type MemoryKeyStoreOptions } from './memory-key-store';
export { RedisKeyStore, redisKeyLayout, type RedisKeyStoreOptions } from './redis-key-store';
export { keyStatusAt } from './key-status';
export { KeyService, DEFAULT_GRACE_SECONDS, MAX_GRACE_SECONDS, effectiveLimits, planLimitsOf, MAX_NAME_LENGTH, type CreatedKey, type KeyServiceOptions, type Plans } from './key-service';
export { createKeyDurabilityMetrics, type KeyDurabilityMetrics } from './key-durability-metrics';
export { KeyResolver, DEFAULT_MAX_CACHE_ENTRIES, type KeyResolution, type KeyResolverOptions } from './key-resolver';

export interface KeyStoreSettings {
  /** A connected client (see connectRedis); null selects the in-process store. */
  redis: RedisClient | null;
  /** Config `redis.namespace`. */
  namespace: string;
  /** Config `dataDir`: where the in-process store keeps `keys.sqlite`, and a Redis store its durable copy. */
  dataDir: string;
  /** With Redis: keep a durable copy under dataDir and restore lost records (CONTRACT §4). */
  durability?: { logger: Logger; metrics: KeyDurabilityMetrics; lossCheckSeconds: number };
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
 * The key store for this process: Redis when a client is given (subscribed to changes by the time
 * this resolves), else the in-process store persisted under `dataDir`. The caller closes it; the
 * Redis client itself stays the caller's.
 */
export async function createKeyStore(settings: KeyStoreSettings): Promise<KeyStore> {
  if (settings.redis) {
    const redisStore = await RedisKeyStore.open(settings.redis, { namespace: settings.namespace });
    const durability = settings.durability;
    if (!durability) return redisStore;
    const { logger, metrics } = durability;
    const replica = new KeyReplica(settings.dataDir, settings.namespace);
    const monitor = new KeyLossMonitor(redisStore, replica, {
      intervalMs: durability.lossCheckSeconds * 1000,
      onDataLoss: (event) => reportDataLoss(logger, metrics, event),
      onCheckFailed: (err) => logger.warn({ err: (err as Error).message }, 'could not check Redis for lost key records; retrying'),
    });
    const store = new DurableKeyStore(redisStore, replica, monitor, (err) => logger.warn({ err: (err as Error).message }, 'could not copy key records to DATA_DIR'));
    await store.start();
    // Once per process; under WORKERS every worker would say it again.
    if (!cluster.worker || cluster.worker.id === 1) await checkRedisDurability(settings.redis, logger, metrics.dataAtRisk);
    return store;
  }
  return new MemoryKeyStore({ dataDir: settings.dataDir });
}
