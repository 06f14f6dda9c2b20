import type { ConsumeOptions, KeyDecision, KeyLimiter, KeyRef, WindowLimits } from '../types';
import type { LeaseGrant, LeaseReturn } from './lease';

/** A store's decision of one request that also asked for a lease: the decision, and the units granted (null: none). */
export interface LeasedDecision {
  decision: KeyDecision;
  grant: LeaseGrant | null;
  /** The return the call carried: whether every window it named took it back (false: a window had turned). */
  returned?: boolean;
}

/**
 * What the leasing limiter (leasing-key-limiter.ts) needs of the shared store besides a KeyLimiter:
 * one round trip that gives back a lease's units, decides a request and takes a lease (the Redis
 * store's lease consume, redis/lease-scripts.ts), and a batch of returns alone.
 */
export interface LeaseStore extends KeyLimiter {
  /**
   * One round trip: `ended` given back first (each of its windows only if still the one it counted
   * in), then the request decided exactly as `consume` does, then, admitted and `wanted` > 0, a
   * lease of up to `wanted` units counted in every window the request counted in, sized by
   * grantedLeaseUnits' rule from what those windows have left after the request. The decision's
   * windows include the granted units.
   */
  consumeWithLease(
    key: KeyRef,
    limits: WindowLimits,
    options: ConsumeOptions | undefined,
    wanted: number,
    ended: LeaseReturn | null,
  ): Promise<LeasedDecision>;
  /** Gives back returns no request carried (leases ended by expiry): for each, whether every window took it. */
  returnUnits(returns: readonly LeaseReturn[]): Promise<boolean[]>;
}
