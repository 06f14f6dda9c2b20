import { ManualClock } from '../../../../src/shared/clock';
import { LeaseBook } from '../../../../src/limits/leases/lease-book';
import { LEASE_LIFE_MS } from '../../../../src/limits/leases/lease-settings';
import { grant, STORE_NOW } from './lease-kit';

const HOLDER = { keyId: 'key_1', consumerId: 'con_1' };

function book(): { clock: ManualClock; book: LeaseBook } {
  const clock = new ManualClock(STORE_NOW);
  return { clock, book: new LeaseBook(clock) };
}

/** Every unit taken has one outcome: used, returned, expired, or still out. */
function expectUnitsAccounted(leases: LeaseBook): void {
  const c = leases.counts.snapshot();
  expect(c.taken).toBe(c.used + c.returned + c.expired + leases.outstandingUnits());
}

describe('LeaseBook', () => {
  it('admits a key from its lease, cost by cost, with headers counting down', () => {
    const { clock, book: leases } = book();
    leases.take(HOLDER, grant(10), clock.now());
    const first = leases.admit(HOLDER, 3);
    expect(first).toMatchObject({ admitted: true });
    expect(first.admitted && first.windows[0]!.remaining).toBe(707);
    const second = leases.admit(HOLDER, 3);
    expect(second.admitted && second.windows[0]!.remaining).toBe(704);
    expect(leases.outstandingUnits()).toBe(4);
    expect(leases.counts.snapshot()).toEqual({ taken: 10, used: 6, returned: 0, expired: 0 });
    expectUnitsAccounted(leases);
  });

  it('sends a request the lease cannot hold to the store, and ends the lease with its return', () => {
    const { clock, book: leases } = book();
    leases.take(HOLDER, grant(10), clock.now());
    leases.admit(HOLDER, 4);
    leases.admit(HOLDER, 4);
    const refused = leases.admit(HOLDER, 4);
    expect(refused).toEqual({
      admitted: false,
      ended: expect.objectContaining({ units: 2, complete: true }),
    });
    expect(leases.size).toBe(0);
    expect(leases.counts.snapshot()).toEqual({ taken: 10, used: 8, returned: 2, expired: 0 });
  });

  it('ends a lease spent to the last unit at once, with nothing to return', () => {
    const { clock, book: leases } = book();
    leases.take(HOLDER, grant(2), clock.now());
    leases.admit(HOLDER, 1);
    expect(leases.admit(HOLDER, 1).admitted).toBe(true);
    expect(leases.size).toBe(0);
    expect(leases.admit(HOLDER, 1)).toEqual({ admitted: false, ended: null });
    expectUnitsAccounted(leases);
  });

  it('does not admit from a lease taken for another consumer (the key moved): it ends', () => {
    const { clock, book: leases } = book();
    leases.take(HOLDER, grant(10), clock.now());
    const moved = leases.admit({ keyId: 'key_1', consumerId: 'con_2' }, 1);
    expect(moved.admitted).toBe(false);
    expect(!moved.admitted && moved.ended?.units).toBe(10);
    expect(leases.admit({ keyId: 'key_1' }, 1)).toEqual({ admitted: false, ended: null });
  });

  it('ends leases when their life is over and says what goes back', () => {
    const { clock, book: leases } = book();
    leases.take(HOLDER, grant(10), clock.now());
    leases.take({ keyId: 'key_2' }, grant(6), clock.now() + 300);
    leases.admit(HOLDER, 1);
    clock.advance(LEASE_LIFE_MS - 1);
    expect(leases.endExpired()).toEqual([]);
    clock.advance(1);
    expect(leases.admit(HOLDER, 1).admitted).toBe(false);
    expect(leases.endExpired()).toEqual([]);
    clock.advance(300);
    expect(leases.endExpired().map((r) => [r.holder.keyId, r.units])).toEqual([['key_2', 6]]);
    expect(leases.counts.snapshot()).toEqual({ taken: 16, used: 1, returned: 15, expired: 0 });
  });

  it('counts as expired the units of a lease that outlived a window, and of a return the store did not take', () => {
    const { clock, book: leases } = book();
    leases.take(HOLDER, grant(10), clock.now());
    // The instance stalled for 55 s: the minute has turned.
    clock.advance(55_000);
    const [late] = leases.endExpired();
    expect(late?.windows.map((w) => w.name)).toEqual(['day']);
    leases.take(HOLDER, grant(8), clock.now());
    const plan = leases.end('key_1')!;
    expect(plan.complete).toBe(true);
    leases.returnFailed(plan);
    expect(leases.counts.snapshot()).toEqual({ taken: 18, used: 0, returned: 0, expired: 18 });
  });

  it('replaces a key’s lease with a new one, ending the old one first', () => {
    const { clock, book: leases } = book();
    leases.take(HOLDER, grant(10), clock.now());
    leases.admit(HOLDER, 1);
    const { lease, ended } = leases.take(HOLDER, grant(20), clock.now());
    expect(ended?.units).toBe(9);
    expect(leases.get('key_1')).toBe(lease);
    expect(leases.endAll().map((r) => r.units)).toEqual([20]);
    expect(leases.size).toBe(0);
    expectUnitsAccounted(leases);
  });

  it('keeps no lease of zero units', () => {
    const { clock, book: leases } = book();
    leases.take(HOLDER, grant(0), clock.now());
    expect(leases.size).toBe(0);
    expect(leases.counts.get('taken')).toBe(0);
  });

  it('before a window reset: ends the key’s lease and names its spent leases the store’s ledger may still hold', () => {
    const { clock, book: leases } = book();
    const other = { keyId: 'key_2', consumerId: 'con_1' };
    leases.take(HOLDER, grant(2), clock.now());
    leases.admit(HOLDER, 2); // spent: ended with nothing sent back
    leases.take(other, grant(2), clock.now());
    leases.admit(other, 2);
    clock.advance(10);
    leases.take(HOLDER, grant(10), clock.now());
    leases.admit(HOLDER, 4);
    const plans = leases.endBeforeReset((holder) => holder.keyId === HOLDER.keyId);
    expect(plans.map((p) => [p.holder.keyId, p.units, p.granted])).toEqual([
      ['key_1', 6, 10],
      ['key_1', 0, 2],
    ]);
    expect(leases.size).toBe(0);
    // Past the ledger's bucket the store holds the other key's spent lease no more: nothing to send.
    clock.advance(3 * LEASE_LIFE_MS);
    expect(leases.endBeforeReset((holder) => holder.consumerId === 'con_1')).toEqual([]);
    expectUnitsAccounted(leases);
  });
});
