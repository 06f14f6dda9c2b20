/**
 * Which thresholds of a window one admitted request passed, from the counts the limiter returned:
 * pure arithmetic, no store call. On Redis a window's count moves atomically, so exactly one
 * admitted request takes it from below a threshold to at or above it, whichever instance decided.
 */

/** Percent of a window's limit at which `quota.threshold` is sent (CONTRACT §5). */
export const QUOTA_THRESHOLDS: readonly number[] = [80, 90, 100];

const NONE: readonly number[] = [];

/** The units at which `percent` of `limit` is reached: ceil(limit * percent / 100). */
export function thresholdUnits(limit: number, percent: number): number {
  return Math.ceil((limit * percent) / 100);
}

/**
 * The thresholds (percent) that the request taking the window from `usedAfter - cost` to
 * `usedAfter` units passed: used_before < T <= used_after. Most requests pass none and allocate
 * nothing.
 */
export function crossedThresholds(limit: number, usedAfter: number, cost: number): readonly number[] {
  const usedBefore = usedAfter - cost;
  if (usedAfter < thresholdUnits(limit, QUOTA_THRESHOLDS[0]!) || usedBefore >= limit) return NONE;
  const crossed: number[] = [];
  for (const percent of QUOTA_THRESHOLDS) {
    const units = thresholdUnits(limit, percent);
    if (usedBefore < units && units <= usedAfter) crossed.push(percent);
  }
  return crossed;
}
