import type { KeyDecision, WindowState } from '../limits/types';
import { keyBannedEvent, quotaThresholdEvent, type QuotaScope, type WebhookEvent } from './events';
import { crossedThresholds } from './thresholds';

const DAY_MS = 86_400_000;

export interface DecisionWatchOptions {
  /** Config `ban.durationSeconds` in ms: a ban the limiter reports ends this long after its decision. */
  banDurationMs: number;
  /** Whether any receiver takes events of this type now (config may be reloaded). */
  wanted(type: 'quota.threshold' | 'key.banned'): boolean;
  emit(event: WebhookEvent): void;
}

/** What the watch needs of the key whose request was decided. */
export interface DecidedKey {
  id: string;
  /** The key's consumer, once consumers exist; absent or null: none. */
  consumerId?: string | null;
}

/** The admitted request whose decision is checked: what every window's events name. */
interface DecidedRequest {
  keyId: string;
  consumerId: string | null;
  cost: number;
  at: number;
}

/**
 * The request path's part of the notifications: called with every limiter decision of a key, it
 * finds `quota.threshold` crossings and `key.banned` in the counts the decision already holds
 * (pure arithmetic: no store command) and hands the events on without waiting (OutboxWriter).
 *
 * A key of a consumer with limits (CONTRACT §4) carries the consumer's windows in its decision:
 * their day and month are checked beside the key's own; the event's id names the consumer, so one
 * crossing is one event whichever key's request made it.
 */
export function createDecisionWatch(options: DecisionWatchOptions) {
  return function watchDecision(key: DecidedKey, decision: KeyDecision, cost: number): void {
    // A decision taken without the shared store (store.failMode local or open) counts per instance:
    // its crossings are not the window's.
    if (decision.fallback) return;
    if (decision.outcome === 'allowed') {
      if (!options.wanted('quota.threshold')) return;
      const request: DecidedRequest = { keyId: key.id, consumerId: key.consumerId ?? null, cost, at: decision.now };
      const dayStart = Math.floor(decision.now / DAY_MS) * DAY_MS;
      checkWindow(request, 'key', 'day', decision.day, dayStart);
      if (decision.month) checkWindow(request, 'key', 'month', decision.month, decision.month.startAt);
      // The consumer's windows, shared by its keys: whichever key's request crosses a threshold names it.
      const shared = decision.consumer;
      if (shared?.day) checkWindow(request, 'consumer', 'day', shared.day, dayStart);
      if (shared?.month) checkWindow(request, 'consumer', 'month', shared.month, shared.month.startAt);
      return;
    }
    if (decision.outcome === 'limited' && decision.bannedNow && options.wanted('key.banned')) {
      // The store sets the ban's end to its decision time plus the duration, so every instance names it alike.
      options.emit(keyBannedEvent(key.id, key.consumerId ?? null, decision.now + options.banDurationMs, decision.now));
    }
  };

  /** Emits one event per threshold of `window` that this request passed. */
  function checkWindow(
    request: DecidedRequest,
    scope: QuotaScope,
    window: 'day' | 'month',
    state: WindowState,
    periodStart: number,
  ): void {
    const { keyId, consumerId, cost, at } = request;
    // An admitted request never takes a window past its limit, so this is the window's exact count.
    const used = state.limit - state.remaining;
    for (const threshold of crossedThresholds(state.limit, used, cost)) {
      options.emit(
        quotaThresholdEvent({
          scope,
          keyId,
          consumerId,
          window,
          threshold,
          limit: state.limit,
          used,
          periodStart,
          periodEnd: state.resetAt,
          at,
        }),
      );
    }
  }
}

export type DecisionWatch = ReturnType<typeof createDecisionWatch>;
