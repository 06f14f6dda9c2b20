import type { Clock } from '../shared/clock';
import type { Logger } from '../shared/logger';
import { KeyActivity, type KeyOutcome } from '../usage/key-activity';
import { DeprecationUsage } from '../usage/deprecation-usage';
import type { GatewayMetrics } from '../shared/metrics/metrics';
import { TrafficRecorder } from '../admin/stats/traffic-recorder';
import { TopKeys } from '../usage/top-keys';
import { UsageRecorder, type UsageConcern } from '../usage/usage-recorder';
import type { Stores } from './stores';
import type { Closers } from './closers';

export interface Recorders {
  /** Who calls deprecated operations (GET /admin/deprecations). */
  deprecationUsage: DeprecationUsage;
  /** Each key's admitted, rate-limited and banned requests and its last use. */
  keyActivity: KeyActivity;
  /** The console's overview: the gateway's counters sampled once a second. */
  traffic: TrafficRecorder;
  /** Each key's requests per minute, for the busiest keys. */
  topKeys: TopKeys;
  /** Where the request path reports each key's outcome: the usage history and the busiest keys. */
  keyOutcomes: { record(keyId: string, outcome: KeyOutcome): void };
}

/** What a refused write of each concern is logged as. */
const WHAT_IS_RECORDED: Record<UsageConcern, string> = {
  keyActivity: 'key usage',
  topKeys: 'the busiest keys',
  deprecationUsage: 'callers of deprecated operations',
};

/** What is counted off the request path: the usage concerns in one batched recorder, which flushes on close. */
export function startRecorders(deps: {
  stores: Stores;
  metrics: GatewayMetrics;
  logger: Logger;
  clock: Clock;
  closers: Closers;
  usagePeriodMs?: () => number;
}): Recorders {
  const { stores, logger, clock, closers } = deps;
  const usage = new UsageRecorder({
    onWriteError: (concern, err) =>
      logger.warn({ err: (err as Error).message }, `could not record ${WHAT_IS_RECORDED[concern]}`),
    // Requests whose usage history was given up on; the busiest keys and the deprecated callers are
    // views of the present, logged when refused and not counted.
    onDropped: (concern, weight) => {
      if (concern === 'keyActivity') deps.metrics.keyUsageDropped.inc(weight);
    },
  });
  closers.add(() => usage.close());
  const deprecationUsage = new DeprecationUsage(usage, stores.deprecationUsage, clock);
  // Usage events (src/usage/events): the ledger keeps per-period counts too while they are on.
  const keyActivity = new KeyActivity(usage, stores.keyActivity, clock, deps.usagePeriodMs);
  const topKeys = new TopKeys(usage, stores.topKeys, clock);
  const traffic = new TrafficRecorder(deps.metrics, clock);
  traffic.start();
  closers.add(() => traffic.stop());
  const keyOutcomes = {
    record(keyId: string, outcome: KeyOutcome): void {
      keyActivity.record(keyId, outcome);
      topKeys.record(keyId, outcome);
    },
  };
  return { deprecationUsage, keyActivity, traffic, topKeys, keyOutcomes };
}
