import { grantedLeaseUnits, wantedLeaseUnits } from '../../../../src/limits/leases/lease-size';
import {
  BUSY_KEY_REQUESTS_PER_SECOND,
  LEASE_HORIZON_MS,
  LEASE_SHARE_DIVISOR,
} from '../../../../src/limits/leases/lease-settings';

describe('wantedLeaseUnits', () => {
  it('asks for the horizon of the rate this instance sees, in units of the cost', () => {
    expect(LEASE_HORIZON_MS).toBe(200);
    expect(wantedLeaseUnits(1_000, 1)).toBe(200);
    expect(wantedLeaseUnits(1_000, 3)).toBe(600);
    expect(wantedLeaseUnits(99, 1)).toBe(19);
  });

  it('asks for nothing when the key is not busy here, or the horizon holds fewer than two requests', () => {
    expect(wantedLeaseUnits(BUSY_KEY_REQUESTS_PER_SECOND - 1, 1)).toBe(0);
    expect(wantedLeaseUnits(0, 1)).toBe(0);
    expect(wantedLeaseUnits(Number.NaN, 1)).toBe(0);
    expect(wantedLeaseUnits(BUSY_KEY_REQUESTS_PER_SECOND, 1)).toBe(10);
    expect(wantedLeaseUnits(1_000, 0)).toBe(0);
  });
});

describe('grantedLeaseUnits', () => {
  it('grants what was asked while the tightest window has plenty left', () => {
    expect(grantedLeaseUnits(200, [1_000_000, 50_000], 1)).toBe(200);
  });

  it('never grants more than 1/8 of what is left in the tightest window', () => {
    expect(LEASE_SHARE_DIVISOR).toBe(8);
    expect(grantedLeaseUnits(200, [1_000_000, 800], 1)).toBe(100);
    expect(grantedLeaseUnits(200, [807, 1_000_000], 1)).toBe(100);
    // In whole requests of the cost: 100 units of cost 3 is 33 requests.
    expect(grantedLeaseUnits(600, [800, 1_000_000], 3)).toBe(99);
  });

  it('grants nothing near a limit: each request is decided by the store as without leases', () => {
    expect(grantedLeaseUnits(200, [15, 1_000], 1)).toBe(0);
    expect(grantedLeaseUnits(200, [16, 1_000], 1)).toBe(2);
    expect(grantedLeaseUnits(200, [0, 1_000], 1)).toBe(0);
    expect(grantedLeaseUnits(200, [-5], 1)).toBe(0);
    expect(grantedLeaseUnits(600, [40], 3)).toBe(0);
  });

  it('grants nothing when nothing was asked or no window counts', () => {
    expect(grantedLeaseUnits(0, [1_000], 1)).toBe(0);
    expect(grantedLeaseUnits(200, [], 1)).toBe(0);
  });
});
