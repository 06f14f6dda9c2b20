import type { Clock } from '../../shared/clock';
import {
  canAdmit,
  ledgerOnlyReturn,
  leaseReturn,
  leaseWindowViews,
  newLease,
  unitsLeft,
  type Lease,
  type LeaseGrant,
  type LeaseHolder,
  type LeaseReturn,
  type LeaseWindowView,
} from './lease';
import { LEASE_LIFE_MS } from './lease-settings';
import { LeaseUnitCounts } from './lease-unit-counts';

/**
 * How long the store's ledger of units out in leases may still hold a lease that ended with nothing
 * to give back: to the end of the ledger bucket of its expiry (lease-scripts.ts, two lives wide).
 */
const LEDGER_HOLDS_MS = 3 * LEASE_LIFE_MS;

/** A request decided from the book: admitted from the key's lease (with the headers' windows), or sent to the store. */
export type LeaseAdmission =
  | { admitted: true; windows: LeaseWindowView[] }
  /** `ended`: the key's lease that could not admit it and has ended; what must go back (null: nothing). */
  | { admitted: false; ended: LeaseReturn | null };

/**
 * The leases one instance (one worker) holds, one per key at most, and what became of their
 * units (`counts`). Pure bookkeeping on the injected clock: the store round trips that take and
 * return units are the caller's; the book says what to return and when.
 */
export class LeaseBook {
  private readonly leases = new Map<string, Lease>();
  /**
   * Leases ended with nothing sent back (spent, or every window closed) that the store's ledger may
   * still hold, with when they began (instance clock): a window reset here takes them off first
   * (unledgered), so that it counts only other instances' leases.
   */
  private readonly silent: { sentAt: number; plan: LeaseReturn }[] = [];

  constructor(
    private readonly clock: Clock,
    readonly counts: LeaseUnitCounts = new LeaseUnitCounts(),
  ) {}

  /**
   * Records the lease the store granted for `holder`, whose round trip began at `sentAt` (this
   * instance's clock). A lease the key still held is ended first; `ended` is what it must return.
   */
  take(holder: LeaseHolder, grant: LeaseGrant, sentAt: number): { lease: Lease; ended: LeaseReturn | null } {
    const ended = this.end(holder.keyId);
    const lease = newLease(holder, grant, sentAt);
    this.counts.add('taken', grant.units);
    if (grant.units > 0) this.leases.set(holder.keyId, lease);
    return { lease, ended };
  }

  /**
   * A request of `cost` units of `holder`: admitted from its lease when the lease is alive, has the
   * units and counted in the same consumer's windows; otherwise that lease ends (its return is in
   * the answer) and the request goes to the store.
   */
  admit(holder: LeaseHolder, cost: number): LeaseAdmission {
    const lease = this.leases.get(holder.keyId);
    if (!lease) return { admitted: false, ended: null };
    if (lease.holder.consumerId !== holder.consumerId || !canAdmit(lease, cost, this.clock.now())) {
      return { admitted: false, ended: this.end(holder.keyId) };
    }
    lease.used += cost;
    this.counts.add('used', cost);
    const windows = leaseWindowViews(lease);
    // Spent to the last unit: ended now (nothing to return), so the next request asks the store at once.
    if (unitsLeft(lease) === 0) this.end(holder.keyId);
    return { admitted: true, windows };
  }

  /** Ends the key's lease now (its consumer changed, its windows were reset, leases turned off): what must go back. */
  end(keyId: string): LeaseReturn | null {
    const lease = this.leases.get(keyId);
    if (!lease) return null;
    this.leases.delete(keyId);
    const unused = unitsLeft(lease);
    const plan = leaseReturn(lease, this.clock.now());
    this.counts.add(plan?.complete ? 'returned' : 'expired', unused);
    if (plan === null) this.keepSilent(lease);
    return plan;
  }

  /** Remembers a lease ended with nothing sent back while the ledger may hold it; forgets the older ones. */
  private keepSilent(lease: Lease): void {
    const since = this.clock.now() - LEDGER_HOLDS_MS;
    while (this.silent.length > 0 && this.silent[0]!.sentAt < since) this.silent.shift();
    this.silent.push({ sentAt: lease.sentAt, plan: ledgerOnlyReturn(lease) });
  }

  /**
   * Before a window reset of the key (`keyId`) or of a consumer's keys: its lease ends, and what must
   * go back so that the store's ledger holds none of this instance's leases of them (the lease's
   * return, and the leases ended with nothing sent back that the ledger may still hold).
   */
  endBeforeReset(matches: (holder: LeaseHolder) => boolean): LeaseReturn[] {
    const plans: LeaseReturn[] = [];
    for (const [keyId, lease] of [...this.leases]) {
      if (!matches(lease.holder)) continue;
      const plan = this.end(keyId);
      if (plan !== null) plans.push(plan);
    }
    const since = this.clock.now() - LEDGER_HOLDS_MS;
    for (let i = this.silent.length - 1; i >= 0; i--) {
      const entry = this.silent[i]!;
      if (entry.sentAt >= since && !matches(entry.plan.holder)) continue;
      this.silent.splice(i, 1);
      if (entry.sentAt >= since) plans.push(entry.plan);
    }
    return plans;
  }

  /** Ends every lease whose life is over; what must go back. */
  endExpired(): LeaseReturn[] {
    const now = this.clock.now();
    const returns: LeaseReturn[] = [];
    for (const [keyId, lease] of [...this.leases]) {
      if (now < lease.expiresAt) continue;
      const plan = this.end(keyId);
      if (plan) returns.push(plan);
    }
    return returns;
  }

  /** Ends every lease (shutdown, a reload that turns leases off); what must go back. */
  endAll(): LeaseReturn[] {
    const returns: LeaseReturn[] = [];
    for (const keyId of [...this.leases.keys()]) {
      const plan = this.end(keyId);
      if (plan) returns.push(plan);
    }
    return returns;
  }

  /** Ends the leases of the keys of `consumerId` (its windows were reset); what they would return. */
  endConsumer(consumerId: string): LeaseReturn[] {
    const returns: LeaseReturn[] = [];
    for (const [keyId, lease] of [...this.leases]) {
      if (lease.holder.consumerId !== consumerId) continue;
      const plan = this.end(keyId);
      if (plan) returns.push(plan);
    }
    return returns;
  }

  /** The store did not take a return (not reached, or a window had turned): its units count as expired. */
  returnFailed(plan: LeaseReturn): void {
    if (plan.complete) this.counts.move('returned', 'expired', plan.units);
  }

  /** The leases out for keys of `consumerId`. */
  *ofConsumer(consumerId: string): Generator<Lease> {
    for (const lease of this.leases.values()) if (lease.holder.consumerId === consumerId) yield lease;
  }

  get(keyId: string): Lease | undefined {
    return this.leases.get(keyId);
  }

  /** Leases out now. */
  get size(): number {
    return this.leases.size;
  }

  /** Units counted in the store and not yet used, over this instance's leases: the under-admission it may cause now. */
  outstandingUnits(): number {
    let units = 0;
    for (const lease of this.leases.values()) units += unitsLeft(lease);
    return units;
  }
}
