import { AdmissionLog } from './admission-log';
import type { MinuteWindowShape, WindowLimits } from './types';
import {
  DAY_MS,
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
  return { minuteIndex: -1, minuteCount: 0, dayIndex: -1, dayCount: 0, bannedUntil: 0, refusalCount: 0, refusalsResetAt: 0, keepUntil: 0, minuteLog: null };
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

export function currentDayCount(state: KeyState, now: number): number {
  return state.dayIndex === dayIndex(now) ? state.dayCount : 0;
}

/**
 * One consume, applied to `state` in place (the in-process store keeps one mutable record per key
 * rather than allocating a new one per request). Afterwards the state's minute and day fields are
 * those of the windows holding `now`, and `state.bannedUntil` is the ban a BANNED or
 * LIMITED_BANNED_NOW outcome reports.
 *
 * Order: ban check (nothing counted), then both windows; a refusal consumes nothing but counts
 * toward the ban, and the refusal that exceeds the threshold bans the key and resets the count.
 */
export function consumeKeyState(
  state: KeyState,
  limits: WindowLimits,
  ban: BanPolicy,
  now: number,
  shape: MinuteWindowShape = 'fixed',
  shadow = false,
): OutcomeCode {
  if (state.bannedUntil > now) return OUTCOME_BANNED;

  const minute = minuteIndex(now);
  const day = dayIndex(now);
  if (shape === 'sliding') {
    state.minuteLog ??= new AdmissionLog();
    state.minuteIndex = minute;
    state.minuteCount = state.minuteLog.prune(now);
  } else if (state.minuteIndex !== minute) {
    state.minuteIndex = minute;
    state.minuteCount = 0;
  }
  if (state.dayIndex !== day) {
    state.dayIndex = day;
    state.dayCount = 0;
  }
  const keepUntil = windowEnd(now, DAY_MS) + ban.retainMs;
  if (state.keepUntil < keepUntil) state.keepUntil = keepUntil;

  if (state.minuteCount < limits.perMinute && state.dayCount < limits.perDay) {
    state.minuteCount += 1;
    state.dayCount += 1;
    if (shape === 'sliding') state.minuteLog!.push(now);
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
