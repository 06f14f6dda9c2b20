import cluster from 'node:cluster';
import type { Logger } from '../shared/logger';
import type { RedisClient } from '../shared/redis/redis';
import { RedisKeyStore } from '../keys/stores/redis-key-store';
import { DurableKeyStore } from '../keys/durability/durable-key-store';
import { checkRedisDurability } from '../keys/durability/redis-durability-check';
import { KeyReplica } from '../keys/durability/key-replica';
import { LossCheck, type DataLossEvent } from '../shared/redis/loss-check';
import type { KeyDurabilityMetrics } from '../keys/durability/key-durability-metrics';

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
    {
      event: 'store_data_loss',
      reason: event.reason,
      knownKeyRecords: event.known,
      foundInRedis: event.foundInRedis,
      restored: event.restoredIds.length,
      restoredIds: event.restoredIds.slice(0, 50),
    },
    `Redis lost key records (${event.reason === 'marker_missing' ? 'it came back empty: restart without persistence, FLUSHALL or a failover to an empty replica' : 'some records are gone: a failover to a replica that missed writes?'}); ` +
      `restored ${event.restoredIds.length} of ${event.known} known key records from DATA_DIR. Windows and bans restarted from zero. See docs/runbook.md#gatewaystoredataloss`,
  );
}

/**
 * The key store on Redis, with a durable copy of its records under dataDir that puts them back
 * when Redis loses them (CONTRACT §4: keys are credentials). Subscribed to changes and checked by
 * the time this resolves. The caller closes it; the Redis client itself stays the caller's.
 */
export async function openDurableRedisKeyStore(
  redis: RedisClient,
  settings: DurableKeyStoreSettings,
): Promise<DurableKeyStore> {
  const redisStore = await RedisKeyStore.open(redis, { namespace: settings.namespace });
  const { logger, metrics } = settings;
  const replica = new KeyReplica(settings.dataDir, settings.namespace);
  const monitor = new LossCheck(redisStore, replica, {
    intervalMs: settings.lossCheckSeconds * 1000,
    onDataLoss: (event) => reportDataLoss(logger, metrics, event),
    onCheckFailed: (err) =>
      logger.warn({ err: (err as Error).message }, 'could not check Redis for lost key records; retrying'),
  });
  const store = new DurableKeyStore(redisStore, replica, monitor, (err) =>
    logger.warn({ err: (err as Error).message }, 'could not copy key records to DATA_DIR'),
  );
  await store.start();
  // Once per process; under WORKERS every worker would say it again.
  if (!cluster.worker || cluster.worker.id === 1) await checkRedisDurability(redis, logger, metrics.dataAtRisk);
  return store;
}
