import type { InFlightLease } from './types';

/**
 * The key's concurrency limit (maxInFlight, CONTRACT §3) as Lua pieces shared by every consume
 * script (the key's own in redis-key-limiter.ts, a consumer's key's in redis-consumer-scripts.ts),
 * so the leases are decided in the same round trip as the windows: a sorted set of lease ids scored
 * by expiry beside the key's hash (`:if`, same hash tag, so same slot). Expired leases (an instance
 * that died before releasing) are dropped first; a full set refuses with outcome 4 and the windows
 * as they stand (for the headers), before anything is counted, so the refusal consumes nothing and
 * counts toward no ban. ARGV[10] maxInFlight ('' for none), 11 the lease id, 12 its ttl ms.
 * Expects `ifkey`, `now` and the windows' reads (mc, dc, minuteResetAt, the month's) in scope;
 * `tail` is what the script's replies carry after the key's ten fields (a consumer's windows).
 */
export function inFlightCheckLua(tail = ''): string {
  return `local maxInFlight = tonumber(ARGV[10])
if maxInFlight then
  redis.call('ZREMRANGEBYSCORE', ifkey, '-inf', now)
  if redis.call('ZCARD', ifkey) >= maxInFlight then
    return {4, now, mc, dc, 0, minuteResetAt, oc, ok, me, ms${tail === '' ? '' : ', ' + tail}}
  end
end`;
}

/** Admitted: the request holds its lease until released or expired; the set expires with its last lease. */
export const IN_FLIGHT_HOLD_LUA = `if maxInFlight then
  redis.call('ZADD', ifkey, now + tonumber(ARGV[12]), ARGV[11])
  redis.call('PEXPIRE', ifkey, tonumber(ARGV[12]))
end`;

/** Outcome code of a consume refused by maxInFlight (windows.ts has 0..3). */
export const OUTCOME_CONCURRENCY_LIMITED = 4;

/** Suffix of the sorted set of a key's in-flight leases (maxInFlight); same hash tag as its hash. */
export const IN_FLIGHT_SUFFIX = ':if';

/** ARGV 10..12 of a consume: the lease, or '' (no maxInFlight) and two placeholders. */
export function inFlightArgv(lease: InFlightLease | undefined): string[] {
  return lease ? [String(lease.max), lease.id, String(lease.ttlMs)] : ['', '', ''];
}
