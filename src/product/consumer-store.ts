import type { Config } from '../shared/config';
import type { Logger } from '../shared/logger';
import type { RedisClient } from '../shared/redis/redis';
import { RedisConsumerStore } from '../consumers/redis-consumer-store';
import { DurableConsumerStore } from '../consumers/durable-consumer-store';

/**
 * The consumer store on Redis with this instance's durable copy behind it (CONTRACT §4: consumers
 * are kept through Redis data loss, like keys), checked as often as the keys are.
 */
export async function openDurableConsumerStore(
  redis: RedisClient,
  config: Config,
  logger: Logger,
): Promise<DurableConsumerStore> {
  const store = new DurableConsumerStore(await RedisConsumerStore.open(redis, config.redis.namespace), {
    dataDir: config.dataDir,
    namespace: config.redis.namespace,
    checkIntervalMs: config.keys.lossCheckSeconds * 1000,
    // The key records' loss check and durable copy; `cause` is theirs (marker_missing, records_missing).
    onDataLoss: (event) =>
      logger.error(
        {
          event: 'store_data_loss',
          reason: 'consumers_missing',
          cause: event.reason,
          knownConsumers: event.known,
          foundInRedis: event.foundInRedis,
          restored: event.restoredIds.length,
          restoredIds: event.restoredIds.slice(0, 50),
        },
        `Redis lost consumer records (${event.reason === 'marker_missing' ? 'it came back empty' : 'some are gone: a failover to a replica that missed writes?'}); restored ${event.restoredIds.length} of ${event.known} from DATA_DIR. Their windows restarted from zero.`,
      ),
    onCheckFailed: (err) =>
      logger.warn({ err: (err as Error).message }, 'could not check Redis for lost consumers; retrying'),
  });
  await store.start();
  return store;
}
