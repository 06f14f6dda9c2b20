/**
 * When a failed delivery is tried again: soon at first (a receiver restarting, a blip), then
 * further apart, for at least a day in all (CONTRACT §5). After the 10th attempt every 8 hours;
 * the first failure after 24 hours ends it.
 */

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;

/** Wait after the 1st, 2nd, … failed attempt; the last repeats. Two retries within the first minute. */
export const RETRY_DELAYS_MS: readonly number[] = [
  5 * SECOND,
  30 * SECOND,
  2 * MINUTE,
  5 * MINUTE,
  15 * MINUTE,
  30 * MINUTE,
  HOUR,
  2 * HOUR,
  4 * HOUR,
  8 * HOUR,
];

/** Retries go on at least this long after the event was seen. */
export const RETRY_FOR_MS = 24 * HOUR;

/** Each wait is moved by up to this share either way, so receivers coming back are not hit in lockstep. */
const JITTER_SHARE = 0.1;

/**
 * When to try again after `attemptsMade` failed attempts (1 after the first), or null when the
 * event has been retried for RETRY_FOR_MS and is given up. `random` is uniform in [0, 1).
 */
export function nextAttemptAt(
  attemptsMade: number,
  createdAt: number,
  now: number,
  random: () => number = Math.random,
): number | null {
  if (now - createdAt >= RETRY_FOR_MS) return null;
  const delay = RETRY_DELAYS_MS[Math.min(Math.max(attemptsMade, 1), RETRY_DELAYS_MS.length) - 1]!;
  return now + Math.round(delay * (1 + JITTER_SHARE * (2 * random() - 1)));
}
