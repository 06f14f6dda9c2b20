import { LeasesNearLimit } from '../../../../src/limits/in-flight/leases-near-limit';
import { isNearLimit } from '../../../../src/limits/in-flight/redis-in-flight';

describe('isNearLimit: a lease taken with the set at half of maxInFlight or more is released at once', () => {
  it.each([
    // [leases held with the new one, maxInFlight, released at once]
    [1, 1, true],
    [1, 2, true],
    [1, 3, false],
    [2, 3, true],
    [1, 4, false],
    [2, 4, true],
    [499, 1000, false],
    [500, 1000, true],
    [1000, 1000, true],
  ])('%i held of %i: %s', (held, max, atOnce) => {
    expect(isNearLimit(held, max)).toBe(atOnce);
  });
});

describe('LeasesNearLimit', () => {
  it('answers once per lease whether it was taken near the limit', () => {
    const leases = new LeasesNearLimit();
    leases.add('near', 60_000);
    expect(leases.take('near')).toBe(true);
    expect(leases.take('near')).toBe(false);
    expect(leases.take('never-added')).toBe(false);
  });

  it('forgets leases whose release never came once they have expired, when the map has grown enough to sweep', () => {
    const leases = new LeasesNearLimit();
    const t0 = 1_000_000;
    for (let i = 0; i < 1000; i++) leases.add(`orphan-${i}`, 5_000, t0);
    expect(leases.size).toBe(1000);
    // Past the orphans' expiry, the adds that reach the sweep threshold drop them; live leases stay.
    for (let i = 0; i < 24; i++) leases.add(`live-${i}`, 5_000, t0 + 10_000);
    expect(leases.size).toBe(24);
    expect(leases.take('live-0')).toBe(true);
    expect(leases.take('orphan-0')).toBe(false);
  });
});
