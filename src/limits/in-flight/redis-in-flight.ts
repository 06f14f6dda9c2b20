import type { RedisClient } from '../../shared/redis/redis';
import type { InFlightLease } from '../types';
import { hashTagOf } from '../redis/redis-names';

/**
 * The key's concurrency limit (maxInFlight, CONTRACT §3) as Lua pieces shared by every consume
 * script (the key's own in redis-key-limiter.ts, a consumer's key's in redis-consumer-scripts.ts),
 * so the leases are decided in the same round trip as the windows: a sorted set of lease ids scored
 * by expiry beside the key's hash (`:if`, same hash tag, so same slot). A full set first drops its
 * expired leases (an instance that died before releasing); still full, it refuses with outcome 4 and
 * the windows as they stand (for the headers), before anything is counted, so the refusal consumes
 * nothing and counts toward no ban. ARGV[10] maxInFlight ('' for none), 11 the lease id, 12 its ttl
 * ms; the releases the consume carries (pending-releases.ts) are the ARGV from `releasesAt` on.
 * Expects `ifkey`, `now` and the windows' reads (mc, dc, minuteResetAt, the month's) in scope;
 * `tail` is what the script's replies carry after the key's ten fields (a consumer's windows).
 */
export function inFlightCheckLua(tail = ''): string {
  return `local maxInFlight = tonumber(ARGV[10])
local inFlight = 0
if maxInFlight then
  inFlight = redis.call('ZCARD', ifkey)
  if inFlight >= maxInFlight then
    redis.call('ZREMRANGEBYSCORE', ifkey, '-inf', now)
    inFlight = redis.call('ZCARD', ifkey)
    if inFlight >= maxInFlight then
      return {4, now, mc, dc, 0, minuteResetAt, oc, ok, me, ms${tail === '' ? '' : ', ' + tail}}
    end
  end
end`;
}

/**
 * The leases of requests that ended in this process since its last consume of the key, removed
 * first, whatever the decision (a ban's refusal included), so the slots they free count for this
 * very request. Expects `ifkey` in scope.
 */
export function inFlightReleaseLua(releasesAt: number): string {
  return `if #ARGV >= ${releasesAt} then redis.call('ZREM', ifkey, unpack(ARGV, ${releasesAt})) end`;
}

/**
 * Admitted: the request holds its lease until released or expired; the set expires with its last
 * lease. `held` (the admission reply's last field) is how many leases the set holds with this one
 * (the check's count, `inFlight`, plus what ZADD added: no second ZCARD), which decides how its
 * release travels (isNearLimit); 0 without maxInFlight.
 */
export const IN_FLIGHT_HOLD_LUA = `local held = 0
  if maxInFlight then
    held = inFlight + redis.call('ZADD', ifkey, now + tonumber(ARGV[12]), ARGV[11])
    redis.call('PEXPIRE', ifkey, tonumber(ARGV[12]))
  end`;

/**
 * Whether a lease taken when its set held `held` (its own included) is released at once rather
 * than carried or batched: at half of maxInFlight or more (always for 1 and 2), a slot freed late
 * may refuse a client within its limits on another instance (CONTRACT: a slot is free when the
 * answer ends); below half, the key has room to spare and a late release costs no one anything.
 */
export function isNearLimit(held: number, max: number): boolean {
  return held >= Math.ceil(max / 2);
}

/** Outcome code of a consume refused by maxInFlight (windows.ts has 0..3). */
export const OUTCOME_CONCURRENCY_LIMITED = 4;

/** ARGV 10..12 of a consume: the lease, or '' (no maxInFlight) and two placeholders. */
export function inFlightArgv(lease: InFlightLease | undefined): string[] {
  return lease ? [String(lease.max), lease.id, String(lease.ttlMs)] : ['', '', ''];
}

/** Releases carried by one consume at most; Lua's unpack has a stack limit, and a consume stays small. */
export const MAX_CARRIED_RELEASES = 64;

/** The batch period of the releases no consume carried: each reaches Redis within two periods, off the request path. */
export const RELEASE_FLUSH_MS = 25;

/**
 * Sends a batch of releases: one ZREM per leases key. One pipeline on a single Redis (one round
 * trip); on a Cluster one pipeline per hash tag, as an ioredis pipeline must stay in one slot.
 */
export async function sendReleases(redis: RedisClient, batch: Map<string, string[]>): Promise<void> {
  const cluster = (redis as { isCluster?: boolean }).isCluster === true;
  const groups = new Map<string, [string, string[]][]>();
  for (const entry of batch) {
    const tag = cluster ? hashTagOf(entry[0]) : '';
    const group = groups.get(tag);
    if (group) group.push(entry);
    else groups.set(tag, [entry]);
  }
  await Promise.all(
    [...groups.values()].map((entries) => {
      const pipeline = redis.pipeline();
      for (const [leasesKey, leaseIds] of entries) pipeline.zrem(leasesKey, ...leaseIds);
      return pipeline.exec();
    }),
  );
}
