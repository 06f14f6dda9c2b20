import type { Registry } from 'prom-client';
import type { Config } from '../shared/config';
import type { AdminListenerAddress } from '../shared/http/admin-listener-address';
import type { Clock } from '../shared/clock';
import type { Logger } from '../shared/logger';
import type { KeyDecisionListener } from '../gateway/handler';
import { Notifier } from '../notifications/notifier';
import type { KeyActivity } from '../usage/key-activity';
import type { KeyDecision } from '../limits/types';
import { shiftedRemaining } from '../limits';
import type { Stores } from './stores';
import type { Closers } from './closers';

/**
 * The webhooks (CONTRACT §5): their watches, outbox writer and dispatcher, over the stores' outbox.
 * `notifications` is reloadable: the notifier asks the config in force for it when it needs it.
 */
export function startNotifications(
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
): Notifier {
  const notifier = new Notifier({
    outbox: deps.stores.webhookOutbox,
    config: () => deps.configInForce().notifications,
    banDurationMs: config.ban.durationSeconds * 1000,
    keys: deps.stores.keyStore,
    clock: deps.clock,
    logger: deps.logger.child({ component: 'webhooks' }),
    registry: deps.registry,
    adminListener: deps.adminListener,
  });
  deps.closers.add(() => notifier.close());
  return notifier;
}

/**
 * Each limiter decision of a key, to those who learn from it off the request path: the usage
 * history takes the units admitted requests took of the day window (the usage export), the
 * notifier the thresholds they passed and the bans. Neither calls a store here.
 */
export function keyDecisionListener(keyActivity: KeyActivity, notifier: Notifier): KeyDecisionListener {
  return (record, decision, cost) => {
    // Decisions taken without the shared store counted nothing in its day window.
    if (decision.outcome === 'allowed' && !decision.fallback) {
      keyActivity.recordUnits(record.id, cost, decision.day.limit - decision.day.remaining, decision.now);
    } else if (decision.outcome === 'limited' && !decision.fallback) {
      // A refusal takes nothing, but reports the day window's count as it stands: units of a killed
      // instance never flushed reach the history (and usage events) with the key's next refusal too.
      keyActivity.recordUnits(record.id, 0, decision.day.limit - decision.day.remaining, decision.now);
    }
    // A lease admission passes no threshold its take did not pass already (leases-of-units: the take counted them).
    if (decision.outcome === 'allowed' && decision.fromLease) return;
    notifier.watchDecision(record, withLeaseUnits(decision), cost + leaseUnitsOf(decision));
  };
}

function leaseUnitsOf(decision: KeyDecision): number {
  return decision.outcome === 'allowed' ? (decision.leaseUnits ?? 0) : 0;
}

/**
 * A decision that took a lease, as its windows stood in the store (the lease's units counted): the
 * thresholds are passed at the take, up to the lease's units early, never late; a window the lease's
 * return brings back below a threshold passes it again under the same event id (one event).
 */
function withLeaseUnits(decision: KeyDecision): KeyDecision {
  const units = leaseUnitsOf(decision);
  if (decision.outcome !== 'allowed' || units === 0) return decision;
  return shiftedRemaining(decision, -units);
}
