import type { RedisClient } from '../../shared/redis/redis';
import type { InFlightLease } from '../types';
import { hashTagOf } from '../redis/redis-names';

/**
 * The key's concurrency limit (maxInFlight, CONTRACT §3) in Redis: a sorted set of lease ids scored
 * by expiry beside the key's hash (redis-names.ts, same hash tag, so same slot), decided in the same
 * consume script as the windows (lua-model.ts: release_leases, lease_room, hold_lease). A full set
 * first drops its expired leases (an instance that died before releasing); still full, the consume
 * refuses with outcome 4 and the windows as they stand (for the headers), before anything is
 * counted, so the refusal consumes nothing and counts toward no ban. The releases a consume carries
 * (pending-releases.ts) are removed first, whatever the decision, so the slots they free count for
 * that very request. This file holds the TypeScript side: the consume's ARGV, the release policy and
 * the batched releases.
 */

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
