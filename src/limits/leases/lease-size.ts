import { BUSY_KEY_REQUESTS_PER_SECOND, LEASE_HORIZON_MS, LEASE_SHARE_DIVISOR } from './lease-settings';

/**
 * How many units a lease takes (docs/scaling.md "Leases of units"). Two halves, because they
 * are decided in two places: what the instance asks for (from the rate it sees), and what the
 * store grants (capped by what is left in the windows, read where the counts are, in the same
 * script that counts the request). 0 means no lease: the request goes the per-request path.
 */

/**
 * Units this instance asks for: enough for LEASE_HORIZON_MS of the requests it sees for the key
 * (each `cost` units), 0 when the key is not busy here (fewer than BUSY_KEY_REQUESTS_PER_SECOND)
 * or when that would cover fewer than two requests (a lease of one request saves no round trip).
 */
export function wantedLeaseUnits(
  requestsPerSecond: number,
  cost: number,
  busy: number = BUSY_KEY_REQUESTS_PER_SECOND,
): number {
  if (!(requestsPerSecond >= busy) || cost < 1) return 0;
  const requests = Math.floor((requestsPerSecond * LEASE_HORIZON_MS) / 1_000);
  return requests < 2 ? 0 : requests * cost;
}

/**
 * Units the store grants of `wanted`: never more than 1/LEASE_SHARE_DIVISOR of what is left in
 * the tightest window the lease counts in (`remaining`: each window's units left after the
 * request's own cost), in whole requests of `cost`; 0 (no lease) when that is fewer than two
 * requests. Near a limit every request is thus decided by the store, as without leases.
 */
export function grantedLeaseUnits(wanted: number, remaining: readonly number[], cost: number): number {
  if (wanted <= 0 || cost < 1 || remaining.length === 0) return 0;
  const tightest = Math.min(...remaining);
  const cap = Math.floor(Math.max(0, tightest) / LEASE_SHARE_DIVISOR);
  const requests = Math.floor(Math.min(wanted, cap) / cost);
  return requests < 2 ? 0 : requests * cost;
}
