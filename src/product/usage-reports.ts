import type { Clock } from '../shared/clock';
import type { KeyLimiter } from '../limits/types';

import type { KeyStore } from '../keys';
import type { KeyActivity } from '../usage/key-activity';
import type { TopKeys } from '../usage/top-keys';
import { usageExportLines } from '../usage/usage-export';
import type { UsageExport } from '../admin/usage-export-routes';
import type { TopKeysDependencies } from '../admin/stats/top-keys-route';
import type { Stores } from './stores';
import type { Recorders } from './recorders';

/**
 * Limits no count reaches: the limiter's usage read with them gives a window's raw count (limit
 * minus what remains), whatever the key's own limits are today.
 */
const UNBOUNDED = { perMinute: Number.MAX_SAFE_INTEGER, perDay: Number.MAX_SAFE_INTEGER };

/** GET /admin/usage/export over the key store, the usage history and, for today, the limiter's day windows. */
export function usageExportOf(deps: {
  keyStore: KeyStore;
  history: KeyActivity;
  keyLimiter: KeyLimiter;
  clock: Clock;
}): UsageExport {
  // The limiter finds a key of a consumer by both ids: the consumer learnt from the listing the export walks.
  const consumerOf = new Map<string, string | undefined>();
  const keys = async () => {
    const records = await deps.keyStore.list();
    for (const record of records) consumerOf.set(record.id, record.consumerId);
    return records;
  };
  const unitsToday = async (keyId: string) =>
    UNBOUNDED.perDay -
    (await deps.keyLimiter.usage({ keyId, consumerId: consumerOf.get(keyId) }, UNBOUNDED)).day.remaining;
  return (firstDay, lastDay) =>
    usageExportLines({ keys, history: deps.history, unitsToday, clock: deps.clock }, firstDay, lastDay);
}

/** GET /admin/stats/top-keys over the per-minute buckets, with each key's name from the key service. */
export function topKeysOf(
  topKeys: TopKeys,
  keyService: { get(id: string): Promise<{ name: string } | null> },
): TopKeysDependencies {
  return { top: (minutes, limit) => topKeys.top(minutes, limit), keyById: (id) => keyService.get(id) };
}

/** Both reports of the admin listener (GET /admin/usage/export, GET /admin/stats/top-keys). */
export function usageReports(deps: {
  stores: Stores;
  recorders: Recorders;
  keyService: { get(id: string): Promise<{ name: string } | null> };
  clock: Clock;
}) {
  const { stores, recorders, clock } = deps;
  return {
    usageExport: usageExportOf({
      keyStore: stores.keyStore,
      history: recorders.keyActivity,
      keyLimiter: stores.limiters.keyLimiter,
      clock,
    }),
    topKeys: topKeysOf(recorders.topKeys, deps.keyService),
  };
}
