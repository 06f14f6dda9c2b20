import type { Clock } from '../shared/clock';
import type { Logger } from '../shared/logger';
import { KeyActivityRecorder, type KeyOutcome } from '../usage/key-activity';
import { DeprecationUsageRecorder } from '../usage/deprecation-usage';
import type { GatewayMetrics } from '../shared/metrics/metrics';
import { TrafficRecorder } from '../admin/stats/traffic-recorder';
import { TopKeysRecorder } from '../usage/top-keys';
import type { Stores } from './stores';
import type { Closers } from './closers';

export interface Recorders {
  /** Who calls deprecated operations (GET /admin/deprecations). */
  deprecationUsage: DeprecationUsageRecorder;
  /** Each key's admitted, rate-limited and banned requests and its last use. */
  keyActivity: KeyActivityRecorder;
  /** The console's overview: the gateway's counters sampled once a second. */
  traffic: TrafficRecorder;
  /** Each key's requests per minute, for the busiest keys. */
  topKeys: TopKeysRecorder;
  /** Where the request path reports each key's outcome: the usage history and the busiest keys. */
  keyOutcomes: { record(keyId: string, outcome: KeyOutcome): void };
}

/** What is counted off the request path and written in batches; each flushes what it holds on close. */
export function startRecorders(deps: {
  stores: Stores;
  metrics: GatewayMetrics;
  logger: Logger;
  clock: Clock;
  closers: Closers;
  usagePeriodMs?: () => number;
}): Recorders {
  const { stores, logger, clock, closers } = deps;
  const deprecationUsage = new DeprecationUsageRecorder(stores.deprecationUsage, clock, undefined, (err) =>
    logger.warn({ err: (err as Error).message }, 'could not record callers of deprecated operations'),
  );
  closers.add(() => deprecationUsage.close());
  const keyActivity = new KeyActivityRecorder(
    stores.keyActivity,
    clock,
    undefined,
    (err) => logger.warn({ err: (err as Error).message }, 'could not record key usage'),
    (requests) => deps.metrics.keyUsageDropped.inc(requests),
    // Usage events (src/usage/events): the ledger keeps per-period counts too while they are on.
    deps.usagePeriodMs,
  );
  closers.add(() => keyActivity.close());
  const traffic = new TrafficRecorder(deps.metrics, clock);
  traffic.start();
  closers.add(() => traffic.stop());
  const topKeys = new TopKeysRecorder(stores.topKeys, clock, undefined, (err) =>
    logger.warn({ err: (err as Error).message }, 'could not record the busiest keys'),
  );
  closers.add(() => topKeys.close());
  const keyOutcomes = {
    record(keyId: string, outcome: KeyOutcome): void {
      keyActivity.record(keyId, outcome);
      topKeys.record(keyId, outcome);
    },
  };
  return { deprecationUsage, keyActivity, traffic, topKeys, keyOutcomes };
}
