import { ManualClock } from '../../../src/shared/clock';
import { FailedTokenLimiter } from '../../../src/admin/failed-tokens';

/** Issue 42: wrong admin tokens bounded per address and over all addresses together (an address's group: src/shared/http/ip-address.ts). */
describe('FailedTokenLimiter', () => {
  it('locks one address after its bound, until its minute ends, and all addresses after theirs', () => {
    const clock = new ManualClock(0);
    const limiter = new FailedTokenLimiter(2, 5, clock);
    expect(limiter.recordFailure('10.0.0.1')).toEqual({ addressLockedNow: false, allLockedNow: false });
    expect(limiter.recordFailure('10.0.0.1')).toEqual({ addressLockedNow: true, allLockedNow: false });
    expect(limiter.lockedOutForMs('10.0.0.1')).toBe(60_000);
    expect(limiter.lockedOutForMs('10.0.0.2')).toBe(0);
    // Rotating addresses: each new one is fresh, but the bound over all of them holds.
    limiter.recordFailure('10.0.0.2');
    limiter.recordFailure('10.0.0.3');
    expect(limiter.recordFailure('10.0.0.4')).toEqual({ addressLockedNow: false, allLockedNow: true });
    clock.advance(1000);
    expect(limiter.lockedOutForMs('10.9.9.9')).toBe(59_000);
    clock.advance(59_000);
    expect(limiter.lockedOutForMs('10.9.9.9')).toBe(0);
    expect(limiter.lockedOutForMs('10.0.0.1')).toBe(0);
  });

  it('an IPv6 host changing addresses within its /64 stays one address', () => {
    const limiter = new FailedTokenLimiter(2, 100, new ManualClock(0));
    limiter.recordFailure('2001:db8:0:1::1');
    limiter.recordFailure('2001:db8:0:1::2');
    expect(limiter.lockedOutForMs('2001:db8:0:1::3')).toBeGreaterThan(0);
    expect(limiter.lockedOutForMs('2001:db8:0:2::1')).toBe(0);
  });
});
