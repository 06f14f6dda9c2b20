import { ManualClock } from '../../../src/shared/clock';
import { MemoryKeyLimiter } from '../../../src/limits/memory-key-limiter';
import { DEFAULT_BAN, consumeTimes, describeKeyLimiterBehaviours } from './key-limiter-behaviours';
import { describeMinuteWindowBehaviours } from './minute-window-behaviours';
import { describeMonthWindowBehaviours } from './month-window-behaviours';

describeMonthWindowBehaviours('MemoryKeyLimiter', {
  create: (clock, ban, shape) => new MemoryKeyLimiter({ ban, clock, minuteWindow: shape, sweepIntervalMs: 0 }),
});

describeKeyLimiterBehaviours('MemoryKeyLimiter', {
  create: (clock, ban) => new MemoryKeyLimiter({ ban, clock, sweepIntervalMs: 0 }),
});

describe('MemoryKeyLimiter: memory', () => {
  const limits = { perMinute: 1, perDay: 100 };

  it('drops the states of keys whose day is over, and keeps today’s', async () => {
    const clock = new ManualClock(Date.UTC(2026, 0, 1, 12));
    const limiter = new MemoryKeyLimiter({ ban: DEFAULT_BAN, clock, sweepIntervalMs: 0 });
    for (let i = 0; i < 100; i++) await limiter.consume({ keyId: `key-${i}` }, limits);
    expect(limiter.size).toBe(100);

    clock.set(Date.UTC(2026, 0, 1, 23, 59));
    expect(limiter.sweep()).toBe(0);
    expect(limiter.size).toBe(100);

    // A day plus the retention that covers refusal windows and bans started that day.
    clock.set(Date.UTC(2026, 0, 2) + 901_000);
    expect(limiter.sweep()).toBe(100);
    expect(limiter.size).toBe(0);
    await limiter.close();
  });

  it('keeps a ban set just before midnight until it has ended', async () => {
    const start = Date.UTC(2026, 0, 1, 23, 59, 50);
    const clock = new ManualClock(start);
    const limiter = new MemoryKeyLimiter({ ban: DEFAULT_BAN, clock, sweepIntervalMs: 0 });
    await consumeTimes(limiter, 'k1', limits, 12);
    expect((await limiter.consume({ keyId: 'k1' }, limits)).outcome).toBe('banned');

    clock.set(start + 900_000 - 1);
    limiter.sweep();
    expect(limiter.size).toBe(1);
    expect((await limiter.consume({ keyId: 'k1' }, limits)).outcome).toBe('banned');
    await limiter.close();
  });

  it('sweeps on a timer that does not hold the process open, and stops it on close', async () => {
    jest.useFakeTimers();
    try {
      const clock = new ManualClock(Date.UTC(2026, 0, 1, 12));
      const limiter = new MemoryKeyLimiter({ ban: DEFAULT_BAN, clock, sweepIntervalMs: 1_000 });
      await limiter.consume({ keyId: 'k1' }, limits);
      clock.advance(2 * 86_400_000);
      jest.advanceTimersByTime(1_000);
      expect(limiter.size).toBe(0);
      await limiter.close();
      expect(jest.getTimerCount()).toBe(0);
    } finally {
      jest.useRealTimers();
    }
  });

  it('refuses ban settings that are not positive integers', () => {
    expect(() => new MemoryKeyLimiter({ ban: { ...DEFAULT_BAN, threshold: 0 }, sweepIntervalMs: 0 })).toThrow(
      /ban.threshold/,
    );
    expect(() => new MemoryKeyLimiter({ ban: { ...DEFAULT_BAN, windowSeconds: 1.5 }, sweepIntervalMs: 0 })).toThrow(
      /ban.windowSeconds/,
    );
  });
});

describeMinuteWindowBehaviours('MemoryKeyLimiter', {
  create: (clock, ban, shape) => new MemoryKeyLimiter({ ban, clock, minuteWindow: shape, sweepIntervalMs: 0 }),
});

describe('MemoryKeyLimiter: a sliding minute seeded from the store’s last answer', () => {
  it('starts a key as if the seeded admissions came at the snapshot’s instant', async () => {
    const at = Date.UTC(2026, 0, 1, 12, 0, 58);
    const clock = new ManualClock(at + 4_000);
    const limiter = new MemoryKeyLimiter({ ban: DEFAULT_BAN, clock, minuteWindow: 'sliding', sweepIntervalMs: 0 });
    const limits = { perMinute: 3, perDay: 100 };
    limiter.seed({ keyId: 'k1' }, { at, minuteCount: 3, dayCount: 10, bannedUntil: 0 });
    // Past the UTC minute boundary, a fixed window would start afresh; the sliding one still holds the 3.
    expect(await limiter.consume({ keyId: 'k1' }, limits)).toMatchObject({
      outcome: 'limited',
      refusedBy: 'minute',
      retryAfterMs: 56_000,
    });
    clock.set(at + 60_000);
    expect(await limiter.consume({ keyId: 'k1' }, limits)).toMatchObject({
      outcome: 'allowed',
      day: { remaining: 89 },
    });
    await limiter.close();
  });
});
