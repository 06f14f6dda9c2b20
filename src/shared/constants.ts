/** The names the two services go by in log lines, spans and traces. */
export const GATEWAY_SERVICE = 'animal-store-gateway';
export const INVENTORY_SERVICE = 'animal-store-inventory';

/** A key's billing day (CONTRACT §4): its month runs from 00:00 UTC on this day of a month to the next. 1..28 so every month has it. */
export const MIN_BILLING_DAY = 1;
export const MAX_BILLING_DAY = 28;
export const DEFAULT_BILLING_DAY = 1;
/** Most units one credit grant may add (CONTRACT §5). */
export const MAX_CREDIT_UNITS = 1_000_000_000;

/** At most this many entries in an access policy list (`allowedOperations`, `allowedAddresses`; CONTRACT §4). */
export const MAX_ACCESS_LIST_ENTRIES = 100;

/**
 * How far ahead of this instance's clock an imported record's past instants (`createdAt`,
 * `updatedAt`, `revokedAt`) may be: another instance's clock, or the exporting machine's, may run
 * a little ahead. A record made "in the future" beyond this is not a record any gateway wrote.
 */
export const IMPORT_CLOCK_SKEW_MS = 5 * 60_000;
/** The longest grace period a rotation gives the old secret (CONTRACT §5: graceSeconds 0..604800). */
export const MAX_GRACE_SECONDS = 604_800;

/**
 * Below this many requests per second on one instance a key is not busy and every request goes to
 * Redis; at or above it the instance takes leases of units for it (CONTRACT §4 "Leases"). The default
 * of config `rateLimit.leases.busyRequestsPerSecond`.
 */
export const BUSY_KEY_REQUESTS_PER_SECOND = 50;
