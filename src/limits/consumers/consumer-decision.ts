import { monthWindowState, type MonthCount } from '../windows/month-window';
import type { ConsumerShare, ConsumerWindows, KeyDecision, RefusingWindow, WindowState } from '../types';
import { DAY_MS, MINUTE_MS, windowEnd, windowState } from '../windows/windows';

/** What a store read of a consumer's windows at `now` (after the decision: with the cost when admitted). */
export interface ConsumerCounts {
  minuteCount: number;
  dayCount: number;
  /** A sliding minute's reset; 0 or undefined: the end of the UTC minute. */
  minuteResetAt?: number;
  /** Null without a month window. */
  month: MonthCount | null;
}

/** The consumer's windows it has limits for, as a client sees them. */
export function consumerWindows(share: ConsumerShare, counts: ConsumerCounts, now: number): ConsumerWindows {
  const { perMinute, perDay, perMonth } = share.limits;
  const windows: ConsumerWindows = {};
  if (perMinute !== undefined)
    windows.minute = windowState(perMinute, counts.minuteCount, counts.minuteResetAt || windowEnd(now, MINUTE_MS));
  if (perDay !== undefined) windows.day = windowState(perDay, counts.dayCount, windowEnd(now, DAY_MS));
  if (perMonth !== undefined && counts.month !== null) windows.month = monthWindowState(perMonth, counts.month);
  return windows;
}

/**
 * A key's decision with its consumer's windows added. On a refusal the binding window is chosen
 * among the key's and the consumer's: of those short of `cost` units, the one that frees them last,
 * since retrying when an earlier one frees units would only be refused again.
 */
export function withConsumer(decision: KeyDecision, windows: ConsumerWindows, cost: number): KeyDecision {
  // Neither carries a binding window to choose: a ban, and a refusal by maxInFlight (nothing counted).
  if (decision.outcome === 'banned' || decision.outcome === 'concurrency_limited') return decision;
  if (decision.outcome === 'allowed') return { ...decision, consumer: windows };
  const candidates: Array<[RefusingWindow, WindowState | undefined]> = [
    ['minute', decision.minute],
    ['day', decision.day],
    ['month', decision.month],
    ['consumer-minute', windows.minute],
    ['consumer-day', windows.day],
    ['consumer-month', windows.month],
  ];
  let refusedBy: RefusingWindow | null = null;
  let resetAt = -Infinity;
  for (const [name, state] of candidates) {
    if (state !== undefined && state.remaining < cost && state.resetAt > resetAt) {
      refusedBy = name;
      resetAt = state.resetAt;
    }
  }
  if (refusedBy === null) return { ...decision, consumer: windows };
  return { ...decision, consumer: windows, refusedBy, retryAfterMs: resetAt - decision.now };
}
