import { AdmissionLog } from './admission-log';
import type { MonthCount, MonthSpan } from './month-window';
import type { MinuteWindowShape, WindowLimits } from '../types';
import {
  DAY_MS,
  EXPIRY_SLACK_MS,
  OUTCOME_ALLOWED,
  OUTCOME_BANNED,
  OUTCOME_LIMITED,
  OUTCOME_LIMITED_BANNED_NOW,
  dayIndex,
  minuteIndex,
  windowEnd,
  type BanPolicy,
  type OutcomeCode,
} from './windows';

/**
 * Everything remembered about one API key. Times are epoch ms; 0 means "none". The Redis store
 * keeps the same fields in one hash (see redis-key-limiter.ts), so the two stores agree field by
 * field.
 */
export interface KeyState {
  minuteIndex: number;
  minuteCount: number;
  dayIndex: number;
  dayCount: number;
  /** Start (epoch ms) of the billing month monthCount and monthCredits belong to; -1 for none. */
  monthStart: number;
  monthCount: number;
  monthCredits: number;
  bannedUntil: number;
  refusalCount: number;
  /** End of the refusal window, fixed by the first refusal in it. */
  refusalsResetAt: number;
  /** After this instant nothing in the state matters any more and it may be dropped. */
  keepUntil: number;
  /**
   * Sliding minute only: admission times of the last 60 s, oldest first (at most the per-minute
   * limit of them). Null with a fixed minute.
   */
  minuteLog: AdmissionLog | null;
}

export function emptyKeyState(): KeyState {
  return {
    minuteIndex: -1,
    minuteCount: 0,
    dayIndex: -1,
    dayCount: 0,
    monthStart: -1,
    monthCount: 0,
    monthCredits: 0,
    bannedUntil: 0,
    refusalCount: 0,
    refusalsResetAt: 0,
    keepUntil: 0,
    minuteLog: null,
  };
}

/** Count of the minute window holding `now` (0 when the stored one is an earlier minute). */
export function currentMinuteCount(state: KeyState, now: number): number {
  return state.minuteIndex === minuteIndex(now) ? state.minuteCount : 0;
}

/**
 * Admissions of the sliding minute at `now`: those in the interval (now - 60 s, now]. Reads the log
 * without changing it.
 */
export function slidingMinuteCount(state: KeyState, now: number): number {
  return state.minuteLog?.countAt(now) ?? 0;
}

/** Oldest admission still in the sliding minute at `now`, or 0 for none. */
export function oldestSlidingAdmission(state: KeyState, now: number): number {
  return state.minuteLog?.oldestAt(now) ?? 0;
}

/**
 * The admission whose leaving the sliding minute frees enough units for `cost`: the oldest for one
 * unit, the (count + cost - limit)-th oldest for more. 0 for none.
 */
export function slidingAdmissionFreeing(state: KeyState, now: number, cost: number, perMinute: number): number {
  if (cost <= 1) return oldestSlidingAdmission(state, now);
  const nth = Math.max(1, slidingMinuteCount(state, now) + cost - perMinute);
  return state.minuteLog?.nthOldestAt(now, nth) ?? 0;
}

export function currentDayCount(state: KeyState, now: number): number {
  return state.dayIndex === dayIndex(now) ? state.dayCount : 0;
}

/** The month count and credits of `span`, the billing month holding now (zero when the state holds an earlier one). */
export function currentMonthCount(state: KeyState, span: MonthSpan): MonthCount {
  const same = state.monthStart === span.start;
  return {
    startAt: span.start,
    resetAt: span.end,
    count: same ? state.monthCount : 0,
    credits: same ? state.monthCredits : 0,
  };
}

/** Moves the state into `span`'s month (dropping an earlier month's count and credits) and keeps it until the month ends. */
export function enterMonth(state: KeyState, span: MonthSpan): void {
  if (state.monthStart !== span.start) {
    state.monthStart = span.start;
    state.monthCount = 0;
    state.monthCredits = 0;
  }
  const keepUntil = span.end + EXPIRY_SLACK_MS;
  if (state.keepUntil < keepUntil) state.keepUntil = keepUntil;
}

/** What one consume asks of a key's state. */
export interface ConsumeRequest {
  limits: WindowLimits;
  ban: BanPolicy;
  now: number;
  /** 'fixed' unless the limiter keeps a sliding minute. */
  shape?: MinuteWindowShape;
  /** Shadow mode: a refusal counts nothing toward a ban. */
  shadow?: boolean;
  /** Units asked for; 1 unless the operation costs more. */
  cost?: number;
  /** The billing month holding `now`; null (or absent) without perMonth. */
  month?: MonthSpan | null;
}

/**
 * Brings the state's windows to those holding `now` (a sliding log pruned, a new minute or day
 * counted afresh, the billing month entered) and keeps the state until its day ends plus `retainMs`.
 * Shared by a key's windows and a consumer's (src/limits/consumers/consumer-state.ts).
 */
export function rollWindows(
  state: KeyState,
  at: { now: number; shape: MinuteWindowShape; month: MonthSpan | null; retainMs: number },
): void {
  const { now, shape, month, retainMs } = at;
  const minute = minuteIndex(now);
  if (shape === 'sliding') {
    state.minuteLog ??= new AdmissionLog();
    state.minuteIndex = minute;
    state.minuteCount = state.minuteLog.prune(now);
  } else if (state.minuteIndex !== minute) {
    state.minuteIndex = minute;
    state.minuteCount = 0;
  }
  const day = dayIndex(now);
  if (state.dayIndex !== day) {
    state.dayIndex = day;
    state.dayCount = 0;
  }
  const keepUntil = windowEnd(now, DAY_MS) + retainMs;
  if (state.keepUntil < keepUntil) state.keepUntil = keepUntil;
  if (month !== null) enterMonth(state, month);
}

/**
 * One consume, applied to `state` in place (the in-process store keeps one mutable record per key
 * rather than allocating a new one per request). Afterwards the state's minute and day fields are
 * those of the windows holding `now`, and `state.bannedUntil` is the ban a BANNED or
 * LIMITED_BANNED_NOW outcome reports.
 *
 * Order: ban check (nothing counted), then every window: `cost` units of each, or none; a refusal
 * consumes nothing but counts toward the ban, and the refusal that exceeds the threshold bans the
 * key and resets the count. `month` is the billing month holding `now`, null without perMonth.
 */
export function consumeKeyState(state: KeyState, request: ConsumeRequest): OutcomeCode {
  const { limits, ban, now, shape = 'fixed', shadow = false, cost = 1, month = null } = request;
  if (state.bannedUntil > now) return OUTCOME_BANNED;

  rollWindows(state, { now, shape, month, retainMs: ban.retainMs });
  const monthHasRoom = month === null || state.monthCount + cost <= limits.perMonth! + state.monthCredits;
  if (state.minuteCount + cost <= limits.perMinute && state.dayCount + cost <= limits.perDay && monthHasRoom) {
    state.minuteCount += cost;
    state.dayCount += cost;
    if (month !== null) state.monthCount += cost;
    if (shape === 'sliding') for (let i = 0; i < cost; i++) state.minuteLog!.push(now);
    return OUTCOME_ALLOWED;
  }
  // Shadowed: the request is forwarded, so its refusal must not lead to a ban.
  if (shadow) return OUTCOME_LIMITED;

  if (state.refusalsResetAt > now) {
    state.refusalCount += 1;
  } else {
    state.refusalCount = 1;
    state.refusalsResetAt = now + ban.windowMs;
  }
  if (state.refusalCount > ban.threshold) {
    state.bannedUntil = now + ban.durationMs;
    state.refusalCount = 0;
    state.refusalsResetAt = 0;
    return OUTCOME_LIMITED_BANNED_NOW;
  }
  return OUTCOME_LIMITED;
}

/** Lifts a ban and forgets the refusals counted toward the next one. */
export function unbanKeyState(state: KeyState): void {
  state.bannedUntil = 0;
  state.refusalCount = 0;
  state.refusalsResetAt = 0;
}
