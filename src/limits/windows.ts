import type { BanSettings, KeyDecision, KeyUsage, WindowLimits, WindowName, WindowState } from './types';

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

/**
 * The window that refuses one more unit, or null when both have room. When both are exhausted the
 * day binds: it resets later, and retrying at the minute boundary would only be refused again.
 */
export function refusingWindow(minuteCount: number, dayCount: number, limits: WindowLimits): WindowName | null {
  if (dayCount >= limits.perDay) return 'day';
  if (minuteCount >= limits.perMinute) return 'minute';
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
    if (!Number.isSafeInteger(value) || value < 1) throw new RangeError(`ban.${name} must be a positive integer (got ${value})`);
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

/**
 * Shapes a store's answer into a KeyDecision. `minuteCount` and `dayCount` are the counts of the
 * windows holding `now` after the decision (incremented when allowed, untouched when limited).
 * `minuteResetAt` is given for a sliding minute; a fixed one ends at the UTC minute.
 */
export function keyDecision(
  outcome: OutcomeCode,
  now: number,
  minuteCount: number,
  dayCount: number,
  bannedUntil: number,
  limits: WindowLimits,
  minuteResetAt: number = windowEnd(now, MINUTE_MS),
): KeyDecision {
  if (outcome === OUTCOME_BANNED) return { outcome: 'banned', bannedUntil, now };
  const dayResetAt = windowEnd(now, DAY_MS);
  const minute = windowState(limits.perMinute, minuteCount, minuteResetAt);
  const day = windowState(limits.perDay, dayCount, dayResetAt);
  if (outcome === OUTCOME_ALLOWED) return { outcome: 'allowed', minute, day, now };
  // A refusal means one window had no room; should the limits have changed under a stored state so
  // that neither looks exhausted now, the minute binds, being the soonest to free a unit.
  const refusedBy = refusingWindow(minuteCount, dayCount, limits) ?? 'minute';
  return {
    outcome: 'limited',
    refusedBy,
    minute,
    day,
    retryAfterMs: (refusedBy === 'day' ? dayResetAt : minuteResetAt) - now,
    bannedNow: outcome === OUTCOME_LIMITED_BANNED_NOW,
    now,
  };
}

/** Both windows and any ban as the admin API shows them; counts are those of the windows holding `now`. */
export function keyUsage(
  now: number,
  minuteCount: number,
  dayCount: number,
  bannedUntil: number,
  limits: WindowLimits,
  minuteResetAt: number = windowEnd(now, MINUTE_MS),
): KeyUsage {
  return {
    minute: windowState(limits.perMinute, minuteCount, minuteResetAt),
    day: windowState(limits.perDay, dayCount, windowEnd(now, DAY_MS)),
    bannedUntil: bannedUntil > now ? bannedUntil : null,
  };
}
