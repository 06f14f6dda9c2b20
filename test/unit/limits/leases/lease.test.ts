import { canAdmit, leaseExpiry, leaseReturn, leaseWindowViews, newLease } from '../../../../src/limits/leases/lease';
import { LEASE_LIFE_MS } from '../../../../src/limits/leases/lease-settings';
import { grant, STORE_NOW } from './lease-kit';

const HOLDER = { keyId: 'key_1', consumerId: 'con_1' };
/** The instance's clock reads 3 s behind the store's: the lease must not care. */
const SENT_AT = STORE_NOW - 3_000;

describe('leaseExpiry', () => {
  it('is the lease life after the round trip began, counted on the instance clock', () => {
    expect(LEASE_LIFE_MS).toBeLessThan(1_000);
    expect(leaseExpiry(grant(100), SENT_AT)).toBe(SENT_AT + LEASE_LIFE_MS);
  });

  it('is never past the end of the earliest window it counted in, whatever the clocks read', () => {
    // The store decided 100 ms before the minute ends.
    const late = grant(100, { storeNow: Date.UTC(2026, 0, 1, 0, 0, 59, 900) });
    expect(leaseExpiry(late, 5_000)).toBe(5_100);
    // Decided at (or past) the window's end: dead at once.
    expect(leaseExpiry(grant(100, { storeNow: Date.UTC(2026, 0, 1, 0, 1) }), 5_000)).toBe(5_000);
  });
});

describe('a lease', () => {
  it('admits while alive and holding the cost', () => {
    const lease = newLease(HOLDER, grant(4), SENT_AT);
    expect(canAdmit(lease, 4, SENT_AT)).toBe(true);
    expect(canAdmit(lease, 5, SENT_AT)).toBe(false);
    expect(canAdmit(lease, 1, lease.expiresAt - 1)).toBe(true);
    expect(canAdmit(lease, 1, lease.expiresAt)).toBe(false);
  });

  it('shows in the headers what the store held at its round trip minus what this instance admitted since', () => {
    const lease = newLease(HOLDER, grant(100), SENT_AT);
    // Held at the round trip: the minute's 700 left after the lease, plus the lease's 100 not yet spent.
    expect(leaseWindowViews(lease).map((w) => [w.name, w.remaining])).toEqual([
      ['minute', 800],
      ['day', 90_100],
      ['consumer-minute', 1_600],
    ]);
    lease.used = 30;
    expect(leaseWindowViews(lease)[0]).toEqual({
      name: 'minute',
      limit: 1_000,
      remaining: 770,
      resetAt: Date.UTC(2026, 0, 1, 0, 1),
    });
  });

  it('never shows less than nothing', () => {
    const lease = newLease(HOLDER, grant(2), SENT_AT);
    lease.windows[0]!.remaining = -10;
    expect(leaseWindowViews(lease)[0]!.remaining).toBe(0);
  });
});

describe('leaseReturn', () => {
  it('gives the unused units back to every window, by the start the store counted them in', () => {
    const lease = newLease(HOLDER, grant(100), SENT_AT);
    lease.used = 60;
    expect(leaseReturn(lease, lease.expiresAt)).toEqual({
      holder: HOLDER,
      units: 40,
      windows: [
        { name: 'minute', startAt: Date.UTC(2026, 0, 1) },
        { name: 'day', startAt: Date.UTC(2026, 0, 1) },
        { name: 'consumer-minute', startAt: Date.UTC(2026, 0, 1) },
      ],
      complete: true,
      // The store's time of the take: a window reset since keeps the units.
      takenAt: STORE_NOW,
      // The units it took: what leaves the store's ledger of units out in leases.
      granted: 100,
      // It counted in its consumer's windows: their ledger holds it too.
      inConsumerWindows: true,
    });
  });

  it('gives nothing back to a window that has closed; nothing at all when all have', () => {
    const lease = newLease(HOLDER, grant(100), SENT_AT);
    // 50 s after the round trip: the minutes have turned (on the instance clock), the day has not.
    const plan = leaseReturn(lease, SENT_AT + 50_000);
    expect(plan?.windows.map((w) => w.name)).toEqual(['day']);
    expect(plan?.complete).toBe(false);
    expect(leaseReturn(lease, SENT_AT + 2 * 86_400_000)).toBeNull();
  });

  it('has nothing to give back when every unit was used', () => {
    const lease = newLease(HOLDER, grant(10), SENT_AT);
    lease.used = 10;
    expect(leaseReturn(lease, SENT_AT)).toBeNull();
  });
});
