import type { KeyState } from './key-state';

/**
 * A key's state moved onto another held for the same key (a key that came back to a consumer it had
 * left the same day): windows of the same index add up, a later one wins, the later ban wins. The
 * sliding log of the state moved is kept (`to`'s log is dropped for it: both describe one key's
 * last minute, and `from` is where it was counted until now).
 */
export function moveKeyState(from: KeyState, to: KeyState): KeyState {
  const merged: KeyState = { ...from };
  if (to.minuteIndex === from.minuteIndex) merged.minuteCount = from.minuteCount + to.minuteCount;
  else if (to.minuteIndex > from.minuteIndex)
    [merged.minuteIndex, merged.minuteCount] = [to.minuteIndex, to.minuteCount];
  if (to.dayIndex === from.dayIndex) merged.dayCount = from.dayCount + to.dayCount;
  else if (to.dayIndex > from.dayIndex) [merged.dayIndex, merged.dayCount] = [to.dayIndex, to.dayCount];
  if (to.monthStart === from.monthStart) {
    merged.monthCount = from.monthCount + to.monthCount;
    merged.monthCredits = from.monthCredits + to.monthCredits;
  } else if (to.monthStart > from.monthStart) {
    [merged.monthStart, merged.monthCount, merged.monthCredits] = [to.monthStart, to.monthCount, to.monthCredits];
  }
  merged.bannedUntil = Math.max(from.bannedUntil, to.bannedUntil);
  merged.keepUntil = Math.max(from.keepUntil, to.keepUntil);
  return merged;
}
