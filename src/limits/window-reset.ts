import { AdmissionLog } from './windows/admission-log';
import {
  currentDayCount,
  currentMinuteCount,
  currentMonthCount,
  slidingMinuteCount,
  type KeyState,
} from './windows/key-state';
import type { MonthSpan } from './windows/month-window';
import type { MinuteWindowShape, WindowName, WindowsHeld } from './types';

/**
 * A window reset in this process (POST /admin/keys/{id}/windows/reset, CONTRACT §5), on a key's
 * state or a consumer's (the same record). It runs between two consumes on the event loop, so a
 * request is counted either before it (and forgotten) or after it. Mirrors RESET_WINDOWS_LUA in
 * redis-key-limiter.ts: the minute (its sliding log too) and the day start from zero where they
 * are; the month's count goes to zero and its credits stay (they were granted for the month, not
 * for what was used of it). Bans and refusals toward one are not windows: DELETE …/ban lifts those.
 */
export interface ResetAt {
  now: number;
  shape: MinuteWindowShape;
  /** The billing month holding now; null when no month is to be reset. */
  month: MonthSpan | null;
}

/** What the named windows hold at `now`, before a reset; the month only when `at.month` is given. */
export function windowsHeld(state: KeyState | undefined, windows: readonly WindowName[], at: ResetAt): WindowsHeld {
  const held: WindowsHeld = {};
  for (const window of windows) {
    if (window === 'minute')
      held.minute =
        state === undefined
          ? 0
          : at.shape === 'sliding'
            ? slidingMinuteCount(state, at.now)
            : currentMinuteCount(state, at.now);
    else if (window === 'day') held.day = state === undefined ? 0 : currentDayCount(state, at.now);
    else if (at.month !== null) held.month = state === undefined ? 0 : currentMonthCount(state, at.month).count;
  }
  return held;
}

/** Sets the named windows of `state` to zero in place; the month only when the state holds `at.month`. */
export function resetStateWindows(state: KeyState, windows: readonly WindowName[], at: ResetAt): void {
  if (windows.includes('minute')) {
    state.minuteCount = 0;
    if (state.minuteLog !== null) state.minuteLog = new AdmissionLog();
  }
  if (windows.includes('day')) state.dayCount = 0;
  if (windows.includes('month') && at.month !== null && state.monthStart === at.month.start) state.monthCount = 0;
}
