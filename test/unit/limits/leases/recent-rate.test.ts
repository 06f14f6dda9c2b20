import { ManualClock } from '../../../../src/shared/clock';
import { KeyRates } from '../../../../src/limits/leases/key-rates';
import { RecentRate } from '../../../../src/limits/leases/recent-rate';

describe('RecentRate', () => {
  it("the rate: the higher of the last second's and the last two seconds' averages, let go bucket by bucket", () => {
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
    // The first 250 ms bucket has left the last second: 50 there, 100 over two seconds (50 a second).
    expect(rate.perSecond()).toBe(50);
    clock.advance(1_000);
    // Only the two seconds' average holds them now, less the first bucket.
    expect(rate.perSecond()).toBe(25);
    clock.advance(1_000);
    expect(rate.perSecond()).toBe(0);
    expect(rate.idle()).toBe(true);
  });

  it("the peak: the busiest quarter second's rate, kept through a quiet gap so that the next burst is sized for a burst", () => {
    const clock = new ManualClock(Date.UTC(2026, 0, 1));
    const rate = new RecentRate(clock);
    // A burst: 100 requests within one 250 ms bucket, then nothing.
    rate.record(100);
    expect({ rate: rate.perSecond(), peak: rate.peakPerSecond() }).toEqual({ rate: 100, peak: 400 });
    // 1.1 s on, the next burst would find both still there.
    clock.advance(1_100);
    expect({ rate: rate.perSecond(), peak: rate.peakPerSecond(), idle: rate.idle() }).toEqual({
      rate: 50,
      peak: 400,
      idle: false,
    });
    // Two seconds on, both have let it go.
    clock.advance(1_000);
    expect({ rate: rate.perSecond(), peak: rate.peakPerSecond(), idle: rate.idle() }).toEqual({
      rate: 0,
      peak: 0,
      idle: true,
    });
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
  it('keeps a rate per key and forgets keys idle for a whole peak interval', () => {
    const clock = new ManualClock(Date.UTC(2026, 0, 1));
    const rates = new KeyRates(clock);
    for (let i = 0; i < 60; i++) rates.record('key_a');
    rates.record('key_b');
    expect(rates.perSecond('key_a')).toBe(60);
    expect(rates.perSecond('key_b')).toBe(1);
    expect(rates.perSecond('key_c')).toBe(0);
    clock.advance(2_000);
    rates.record('key_b');
    rates.forgetIdle();
    expect(rates.size).toBe(1);
    expect(rates.perSecond('key_a')).toBe(0);
  });
});
