import { monthWindowState, type MonthCount } from './month-window';
import type {
  BanSettings,
  KeyDecision,
  KeyUsage,
  MonthWindowState,
  WindowLimits,
  WindowName,
  WindowState,
} from '../types';

/**
 * The arithmetic both key limiters share: window indices and ends, which window refuses, and how a
 * store's raw answer (an outcome code and two counts) becomes a KeyDecision. The Lua script in
 * redis-key-limiter.ts mirrors key-state.ts; both end in `keyDecision` here.
 */

export const MINUTE_MS = 60_000;
export const DAY_MS = 86_400_000;

/** Outcome codes, shared by the in-process state machine and the Lua script's reply. */
export const OUTCOME_ALLOWED = 0;
export const OUTCOME_LIMITED = 1;
export const OUTCOME_BANNED = 2;
/** Limited, and this refusal pushed the key over the ban threshold. */
export const OUTCOME_LIMITED_BANNED_NOW = 3;
export type OutcomeCode = 0 | 1 | 2 | 3;

/** Index of the UTC minute holding `now`. */
export function minuteIndex(now: number): number {
  return Math.floor(now / MINUTE_MS);
}

/** Index of the UTC calendar day holding `now`. */
export function dayIndex(now: number): number {
  return Math.floor(now / DAY_MS);
}

/** Epoch ms at which the window of `sizeMs` holding `now` ends (and the next one starts). */
export function windowEnd(now: number, sizeMs: number): number {
  return (Math.floor(now / sizeMs) + 1) * sizeMs;
}

export function windowState(limit: number, count: number, resetAt: number): WindowState {
  return { limit, remaining: count >= limit ? 0 : limit - count, resetAt };
}

/** Counts and limits `refusingWindow` weighs; month fields only with a month window. */
export interface WindowCounts {
  minuteCount: number;
  dayCount: number;
  limits: WindowLimits;
  /** Units the request asks for; 1 unless its operation costs more. */
  cost?: number;
  monthCount?: number;
  /** perMonth plus this month's credits; null (or absent) without a month window. */
  monthLimit?: number | null;
}

/**
 * The window that refuses `cost` more units, or null when every window has room for them. When
 * several are short the one that resets last binds (month, then day, then minute): retrying when
 * an earlier one frees units would only be refused again.
 */
export function refusingWindow({
  minuteCount,
  dayCount,
  limits,
  cost = 1,
  monthCount = 0,
  monthLimit = null,
}: WindowCounts): WindowName | null {
  if (monthLimit !== null && monthCount + cost > monthLimit) return 'month';
  if (dayCount + cost > limits.perDay) return 'day';
  if (minuteCount + cost > limits.perMinute) return 'minute';
  return null;
}

/** Ban settings in the units the stores use, computed once per limiter. */
export interface BanPolicy {
  threshold: number;
  windowMs: number;
  durationMs: number;
  /**
   * How long past the end of its day a key's state is kept. A refusal window or a ban started
   * during the day can outlive the day by at most this much; the day counter itself needs nothing.
   */
  retainMs: number;
}

/** Slack on top of every expiry, so a state is never dropped at the very instant it may be read. */
export const EXPIRY_SLACK_MS = 1_000;

export function banPolicy(ban: BanSettings): BanPolicy {
  for (const [name, value] of [
    ['threshold', ban.threshold],
    ['windowSeconds', ban.windowSeconds],
    ['durationSeconds', ban.durationSeconds],
  ] as const) {
    if (!Number.isSafeInteger(value) || value < 1)
      throw new RangeError(`ban.${name} must be a positive integer (got ${value})`);
  }
  const windowMs = ban.windowSeconds * 1000;
  const durationMs = ban.durationSeconds * 1000;
  return { threshold: ban.threshold, windowMs, durationMs, retainMs: Math.max(windowMs, durationMs) + EXPIRY_SLACK_MS };
}

/**
 * When a sliding minute frees a unit: its oldest admission plus a minute, or (nothing admitted in
 * the last 60 s) a full minute from now. `oldestAdmission` 0 means none.
 */
export function slidingMinuteResetAt(oldestAdmission: number, now: number): number {
  return oldestAdmission > 0 ? oldestAdmission + MINUTE_MS : now + MINUTE_MS;
}

/** A store's raw answer, as `keyDecision` and `keyUsage` read it. */
export interface StoreAnswer {
  now: number;
  /** Counts of the windows holding `now`. */
  minuteCount: number;
  dayCount: number;
  /** End of a ban (epoch ms); 0 or past for none. */
  bannedUntil: number;
  limits: WindowLimits;
  /** Given for a sliding minute; a fixed one ends at the UTC minute. */
  minuteResetAt?: number;
  /** Null (or absent) unless the limits have perMonth. */
  month?: MonthCount | null;
}

/** A consume's answer: the outcome code and the cost it was asked for, beside the counts. */
export interface ConsumeAnswer extends StoreAnswer {
  outcome: OutcomeCode;
  cost?: number;
}

/**
 * Shapes a store's answer into a KeyDecision. The counts are those of the windows holding `now`
 * after the decision (increased by the cost when allowed, untouched when limited).
 */
export function keyDecision(answer: ConsumeAnswer): KeyDecision {
  const { outcome, now, minuteCount, dayCount, bannedUntil, limits, cost = 1, month = null } = answer;
  if (outcome === OUTCOME_BANNED) return { outcome: 'banned', bannedUntil, now };
  const minuteResetAt = answer.minuteResetAt ?? windowEnd(now, MINUTE_MS);
  const dayResetAt = windowEnd(now, DAY_MS);
  const minute = windowState(limits.perMinute, minuteCount, minuteResetAt);
  const day = windowState(limits.perDay, dayCount, dayResetAt);
  const monthState = monthOf(limits, month);
  if (outcome === OUTCOME_ALLOWED)
    return monthState
      ? { outcome: 'allowed', minute, day, month: monthState, now }
      : { outcome: 'allowed', minute, day, now };
  // A refusal means one window had no room; should the limits have changed under a stored state so
  // that none looks short now, the minute binds, being the soonest to free units.
  const refusedBy =
    refusingWindow({
      minuteCount,
      dayCount,
      limits,
      cost,
      monthCount: month?.count ?? 0,
      monthLimit: monthState?.limit ?? null,
    }) ?? 'minute';
  const resetAt = refusedBy === 'month' ? monthState!.resetAt : refusedBy === 'day' ? dayResetAt : minuteResetAt;
  const limited = {
    outcome: 'limited' as const,
    refusedBy,
    minute,
    day,
    retryAfterMs: resetAt - now,
    bannedNow: outcome === OUTCOME_LIMITED_BANNED_NOW,
    now,
  };
  return monthState ? { ...limited, month: monthState } : limited;
}

function monthOf(limits: WindowLimits, month: MonthCount | null): MonthWindowState | undefined {
  return limits.perMonth === undefined || month === null ? undefined : monthWindowState(limits.perMonth, month);
}

/** Every window and any ban as the admin API shows them; counts are those of the windows holding `now`. */
export function keyUsage(answer: StoreAnswer): KeyUsage {
  const { now, minuteCount, dayCount, bannedUntil, limits, month = null } = answer;
  const usage: KeyUsage = {
    minute: windowState(limits.perMinute, minuteCount, answer.minuteResetAt ?? windowEnd(now, MINUTE_MS)),
    day: windowState(limits.perDay, dayCount, windowEnd(now, DAY_MS)),
    bannedUntil: bannedUntil > now ? bannedUntil : null,
  };
  const monthState = monthOf(limits, month);
  if (monthState) usage.month = monthState;
  return usage;
}
