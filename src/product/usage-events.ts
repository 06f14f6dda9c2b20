import path from 'node:path';
import type { Registry } from 'prom-client';
import type { Config } from '../shared/config';
import type { AdminListenerAddress } from '../shared/http/admin-listener-address';
import type { Clock } from '../shared/clock';
import type { Logger } from '../shared/logger';
import { RedisOutbox } from '../notifications/redis-outbox';
import { SqliteOutbox } from '../notifications/sqlite-outbox';
import { PeriodCloser } from '../usage/events/period-closer';
import { RedisSentStateStore } from '../usage/events/redis-sent-state';
import { SqliteSentStateStore } from '../usage/events/sqlite-sent-state';
import { UsageEvents } from '../usage/events/usage-events-service';
import type { Stores, WritableDatabase } from './stores';
import type { Closers } from './closers';

/** Where usage events wait in process: beside the webhooks' files, in a folder of their own. */
export const USAGE_EVENTS_DIR = 'usage-events';

/**
 * Usage events (CONTRACT §5) over the stores: a second outbox of the webhooks' kind, of its own
 * (Redis keys under `<ns>:usage:`, or SQLite under dataDir/usage-events/), so neither bound nor
 * receivers mix with the webhooks'; the sent state beside it. `usageEvents` is reloadable.
 */
export function startUsageEvents(
  config: Config,
  deps: {
    stores: Stores;
    configInForce: () => Config;
    registry: Registry;
    clock: Clock;
    logger: Logger;
    closers: Closers;
    adminListener: () => AdminListenerAddress;
  },
): { usageEvents: UsageEvents; writableDatabases: () => WritableDatabase[] } {
  const { stores } = deps;
  const redis = stores.redis;
  // Without Redis, the files once opened (at the first tick with usage events on): /readyz probes
  // them while usage events are on.
  let files: WritableDatabase[] = [];
  const open = () => {
    if (redis)
      return {
        outbox: new RedisOutbox(redis, `${config.redis.namespace}:usage`),
        state: new RedisSentStateStore(redis, config.redis.namespace),
      };
    const dir = path.join(config.dataDir, USAGE_EVENTS_DIR);
    const outbox = new SqliteOutbox(dir);
    const state = new SqliteSentStateStore(dir);
    files = [
      { name: 'usage-events outbox database', checkWrites: () => outbox.checkWrites() },
      { name: 'usage-events state database', checkWrites: () => state.checkWrites() },
    ];
    return { outbox, state };
  };
  const usageEvents = new UsageEvents({
    ledger: stores.keyActivity,
    open,
    keys: stores.keyStore,
    config: () => deps.configInForce().usageEvents,
    clock: deps.clock,
    logger: deps.logger.child({ component: 'usage-events' }),
    registry: deps.registry,
    adminListener: deps.adminListener,
  });
  usageEvents.start();
  deps.closers.add(() => usageEvents.close());
  // A reload that turns usage events off stops both closer and dispatcher: the files stay open but
  // are no longer written, so they no longer decide readiness.
  const inUse = () => {
    const { enabled, url } = deps.configInForce().usageEvents;
    return enabled && url !== null;
  };
  return { usageEvents, writableDatabases: () => (inUse() ? files : []) };
}

/** The period length the usage history counts in (0: off), asked at each request: a reload changes it. */
export function usagePeriodMsInForce(configInForce: () => Config): () => number {
  return () => PeriodCloser.periodMsOf(configInForce().usageEvents);
}
