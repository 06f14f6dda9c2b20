import type { ConsumerCounts } from './consumer-decision';
import {
  currentDayCount,
  currentMinuteCount,
  currentMonthCount,
  oldestSlidingAdmission,
  rollWindows,
  slidingAdmissionFreeing,
  slidingMinuteCount,
  type KeyState,
} from '../windows/key-state';
import type { MonthSpan } from '../windows/month-window';
import type { ConsumerWindowLimits, MinuteWindowShape } from '../types';
import { EXPIRY_SLACK_MS, slidingMinuteResetAt } from '../windows/windows';

/**
 * A consumer's windows in this process (the in-process limiter's half of CONTRACT §4's consumers):
 * the same record as a key's state, of which only the minute, day and month fields are used (bans
 * stay per key). Mirrors the consumer part of the consume script (redis/decision-scripts.ts).
 */

/** Brings the state's windows to those holding `now` (a sliding log pruned), and keeps it until its day or month ends. */
export function rollConsumerState(
  state: KeyState,
  now: number,
  shape: MinuteWindowShape,
  month: MonthSpan | null,
): void {
  rollWindows(state, { now, shape, month, retainMs: EXPIRY_SLACK_MS });
}

/** Whether every window the consumer has a limit for takes `cost` more (the state rolled to now). */
export function consumerHasRoom(
  state: KeyState,
  limits: ConsumerWindowLimits,
  cost: number,
  month: MonthSpan | null,
): boolean {
  if (limits.perMinute !== undefined && state.minuteCount + cost > limits.perMinute) return false;
  if (limits.perDay !== undefined && state.dayCount + cost > limits.perDay) return false;
  if (month !== null && limits.perMonth !== undefined && state.monthCount + cost > limits.perMonth + state.monthCredits)
    return false;
  return true;
}

export function admitConsumer(
  state: KeyState,
  cost: number,
  now: number,
  shape: MinuteWindowShape,
  month: MonthSpan | null,
): void {
  state.minuteCount += cost;
  state.dayCount += cost;
  if (month !== null) state.monthCount += cost;
  if (shape === 'sliding') for (let i = 0; i < cost; i++) state.minuteLog!.push(now);
}

/** The consumer's counts at `now`; a refused cost of several units waits for as many admissions to leave a sliding minute. */
export function consumerCountsOf(
  state: KeyState,
  now: number,
  shape: MinuteWindowShape,
  month: MonthSpan | null,
  limits: ConsumerWindowLimits,
  refusedCost = 0,
): ConsumerCounts {
  const monthCount = month === null ? null : currentMonthCount(state, month);
  if (shape === 'fixed')
    return { minuteCount: currentMinuteCount(state, now), dayCount: currentDayCount(state, now), month: monthCount };
  const freeing =
    refusedCost > 1 && limits.perMinute !== undefined
      ? slidingAdmissionFreeing(state, now, refusedCost, limits.perMinute)
      : oldestSlidingAdmission(state, now);
  return {
    minuteCount: slidingMinuteCount(state, now),
    dayCount: currentDayCount(state, now),
    minuteResetAt: slidingMinuteResetAt(freeing, now),
    month: monthCount,
  };
}
