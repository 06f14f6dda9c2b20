/**
 * gateway_lease_units_total{outcome}: what became of the units leases took (the counting; the
 * metric reads it). Every unit taken ends as exactly one of used, returned or expired, so for a
 * book with no lease out taken = used + returned + expired.
 *
 * - taken: counted in the store for a lease;
 * - used: a request was admitted with it;
 * - returned: unused, and given back to every window the lease counted in;
 * - expired: unused and not given back to every window: the lease outlived a window (its units
 *   stay counted there), the instance could not reach the store to give them back, or gave up the
 *   lease without a return. An instance that dies loses its leases without counting them anywhere.
 */
export type LeaseUnitOutcome = 'taken' | 'used' | 'returned' | 'expired';

export const LEASE_UNIT_OUTCOMES: readonly LeaseUnitOutcome[] = ['taken', 'used', 'returned', 'expired'];

export class LeaseUnitCounts {
  private readonly totals: Record<LeaseUnitOutcome, number> = { taken: 0, used: 0, returned: 0, expired: 0 };

  add(outcome: LeaseUnitOutcome, units: number): void {
    if (units > 0) this.totals[outcome] += units;
  }

  /** Moves units from one outcome to another (a return the store did not take: returned → expired). */
  move(from: LeaseUnitOutcome, to: LeaseUnitOutcome, units: number): void {
    if (units <= 0) return;
    this.totals[from] -= units;
    this.totals[to] += units;
  }

  get(outcome: LeaseUnitOutcome): number {
    return this.totals[outcome];
  }

  snapshot(): Readonly<Record<LeaseUnitOutcome, number>> {
    return { ...this.totals };
  }
}
