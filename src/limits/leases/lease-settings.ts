/**
 * The numbers that shape a lease of units (CONTRACT §4 "Leases", docs/scaling.md "Leases: the
 * design"). One place, so that the sizing, the book and the docs cannot drift apart.
 */

/** A lease holds what this instance's recent rate for the key needs for this long. */
export const LEASE_HORIZON_MS = 200;

/** A lease never takes more than 1/8 of what is left in the tightest window it counts in. */
export const LEASE_SHARE_DIVISOR = 8;

// The default of config `rateLimit.leases.busyRequestsPerSecond`: the config schema reads it too, so it lives in shared.
export { BUSY_KEY_REQUESTS_PER_SECOND } from '../../shared/constants';

/** A lease ends this long after its round trip began at the latest (under a second: headers are never staler). */
export const LEASE_LIFE_MS = 500;

/**
 * The interval over which the requests an instance sees for a key are counted: their average rate
 * says whether the key is busy here, the busiest bucket's rate sizes its lease. Two seconds, so that
 * a key that comes in bursts once a second is seen busy, and its lease sized for a burst, at the
 * start of each burst.
 */
export const RATE_INTERVAL_MS = 2_000;

/** Requests are counted in buckets of this long (a bucket's requests leave the interval together). */
export const RATE_BUCKET_MS = 250;
