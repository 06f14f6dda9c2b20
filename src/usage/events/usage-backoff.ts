import { RETRY_DELAYS_MS } from '../../notifications/backoff';

/**
 * When a batch the sink refused is tried again: the webhooks' schedule (5 s, 30 s, 2 min, …), but
 * never further apart than a period nor than USAGE_RETRY_WINDOW_MS, so a sink that comes back gets
 * what waited within one period (or five minutes). Given up only after USAGE_RETRY_FOR_MS, inside
 * OpenMeter's 32 days of de-duplication, so a resend is still harmless there.
 */

export const USAGE_RETRY_WINDOW_MS = 5 * 60_000;
export const USAGE_RETRY_FOR_MS = 7 * 86_400_000;

export function nextUsageAttemptAt(
  attemptsMade: number,
  createdAt: number,
  now: number,
  periodMs: number,
): number | null {
  if (now - createdAt >= USAGE_RETRY_FOR_MS) return null;
  const scheduled = RETRY_DELAYS_MS[Math.min(Math.max(attemptsMade, 1), RETRY_DELAYS_MS.length) - 1]!;
  return now + Math.min(scheduled, Math.max(periodMs, 1000), USAGE_RETRY_WINDOW_MS);
}
