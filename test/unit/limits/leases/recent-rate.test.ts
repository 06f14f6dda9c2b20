import { ManualClock } from '../../../../src/shared/clock';
import { KeyRates } from '../../../../src/limits/leases/key-rates';
import { RecentRate } from '../../../../src/limits/leases/recent-rate';

describe('RecentRate', () => {
  it('counts the requests of the last second and lets them go as time passes', () => {
    const clock = new ManualClock(Date.UTC(2026, 0, 1));
    const rate = new RecentRate(clock);
    expect(rate.perSecond()).toBe(0);
    for (let i = 0; i < 100; i++) {
      rate.record();
      clock.advance(5);
    }
    // 100 requests over 500 ms: all within the last second.
    expect(rate.perSecond()).toBe(100);
    clock.advance(600);
    // The first 250 ms bucket has left.
    expect(rate.perSecond()).toBe(50);
    clock.advance(1_000);
    expect(rate.perSecond()).toBe(0);
    expect(rate.idle()).toBe(true);
  });

  it('forgets everything after a long pause and counts afresh', () => {
    const clock = new ManualClock(Date.UTC(2026, 0, 1));
    const rate = new RecentRate(clock);
    rate.record(40);
    clock.advance(3_600_000);
    rate.record(3);
    expect(rate.perSecond()).toBe(3);
  });
});

describe('KeyRates', () => {
  it('keeps a rate per key and forgets keys idle for a whole interval', () => {
    const clock = new ManualClock(Date.UTC(2026, 0, 1));
    const rates = new KeyRates(clock);
    for (let i = 0; i < 60; i++) rates.record('key_a');
    rates.record('key_b');
    expect(rates.perSecond('key_a')).toBe(60);
    expect(rates.perSecond('key_b')).toBe(1);
    expect(rates.perSecond('key_c')).toBe(0);
    clock.advance(1_000);
    rates.record('key_b');
    rates.forgetIdle();
    expect(rates.size).toBe(1);
    expect(rates.perSecond('key_a')).toBe(0);
  });
});
