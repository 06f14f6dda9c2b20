import {
  DAY_MS,
  MINUTE_MS,
  OUTCOME_ALLOWED,
  OUTCOME_BANNED,
  OUTCOME_LIMITED,
  OUTCOME_LIMITED_BANNED_NOW,
  banPolicy,
  dayIndex,
  keyDecision,
  keyUsage,
  minuteIndex,
  refusingWindow,
  windowEnd,
  windowState,
} from '../../../../src/limits/windows/windows';

const T = Date.UTC(2026, 2, 14, 9, 26, 53, 589);
const limits = { perMinute: 60, perDay: 1000 };

describe('window arithmetic', () => {
  it('indexes UTC minutes and calendar days from the epoch', () => {
    expect(minuteIndex(0)).toBe(0);
    expect(minuteIndex(59_999)).toBe(0);
    expect(minuteIndex(60_000)).toBe(1);
    expect(minuteIndex(T)).toBe(Math.floor(Date.UTC(2026, 2, 14, 9, 26) / MINUTE_MS));
    expect(dayIndex(Date.UTC(2026, 2, 14))).toBe(dayIndex(Date.UTC(2026, 2, 14, 23, 59, 59, 999)));
    expect(dayIndex(Date.UTC(2026, 2, 15))).toBe(dayIndex(T) + 1);
  });

  it('ends a window at the next boundary, and a boundary instant belongs to the window it starts', () => {
    expect(windowEnd(T, MINUTE_MS)).toBe(Date.UTC(2026, 2, 14, 9, 27));
    expect(windowEnd(T, DAY_MS)).toBe(Date.UTC(2026, 2, 15));
    expect(windowEnd(Date.UTC(2026, 2, 15), DAY_MS)).toBe(Date.UTC(2026, 2, 16));
    expect(windowEnd(Date.UTC(2026, 2, 14, 23, 59, 59, 999), DAY_MS)).toBe(Date.UTC(2026, 2, 15));
  });

  it('never reports a negative remainder', () => {
    expect(windowState(60, 0, 1)).toEqual({ limit: 60, remaining: 60, resetAt: 1 });
    expect(windowState(60, 60, 1).remaining).toBe(0);
    expect(windowState(5, 60, 1).remaining).toBe(0);
  });
});

describe('refusingWindow', () => {
  it('is null while both windows have room', () => {
    expect(refusingWindow({ minuteCount: 59, dayCount: 999, limits })).toBeNull();
  });
  it('names the exhausted window, and the day when both are', () => {
    expect(refusingWindow({ minuteCount: 60, dayCount: 10, limits })).toBe('minute');
    expect(refusingWindow({ minuteCount: 10, dayCount: 1000, limits })).toBe('day');
    expect(refusingWindow({ minuteCount: 60, dayCount: 1000, limits })).toBe('day');
  });
});

describe('keyDecision', () => {
  it('shapes an allowed answer with both windows after counting', () => {
    expect(
      keyDecision({ outcome: OUTCOME_ALLOWED, now: T, minuteCount: 1, dayCount: 41, bannedUntil: 0, limits }),
    ).toEqual({
      outcome: 'allowed',
      minute: { limit: 60, remaining: 59, resetAt: Date.UTC(2026, 2, 14, 9, 27) },
      day: { limit: 1000, remaining: 959, resetAt: Date.UTC(2026, 2, 15) },
      now: T,
    });
  });

  it('waits for the minute when the minute binds', () => {
    const d = keyDecision({ outcome: OUTCOME_LIMITED, now: T, minuteCount: 60, dayCount: 100, bannedUntil: 0, limits });
    expect(d).toMatchObject({ outcome: 'limited', refusedBy: 'minute', retryAfterMs: 6_411, bannedNow: false });
  });

  it('waits for midnight when the day binds, alone or with the minute', () => {
    const wait = Date.UTC(2026, 2, 15) - T;
    expect(
      keyDecision({ outcome: OUTCOME_LIMITED, now: T, minuteCount: 3, dayCount: 1000, bannedUntil: 0, limits }),
    ).toMatchObject({ refusedBy: 'day', retryAfterMs: wait });
    expect(
      keyDecision({ outcome: OUTCOME_LIMITED, now: T, minuteCount: 60, dayCount: 1000, bannedUntil: 0, limits }),
    ).toMatchObject({ refusedBy: 'day', retryAfterMs: wait });
  });

  it('always gives a positive wait, even at the last millisecond of a window', () => {
    const last = Date.UTC(2026, 2, 14, 23, 59, 59, 999);
    expect(
      keyDecision({ outcome: OUTCOME_LIMITED, now: last, minuteCount: 60, dayCount: 1, bannedUntil: 0, limits }),
    ).toMatchObject({ retryAfterMs: 1 });
    expect(
      keyDecision({ outcome: OUTCOME_LIMITED, now: last, minuteCount: 1, dayCount: 1000, bannedUntil: 0, limits }),
    ).toMatchObject({ retryAfterMs: 1 });
    expect(
      keyDecision({
        outcome: OUTCOME_LIMITED,
        now: Date.UTC(2026, 2, 14),
        minuteCount: 60,
        dayCount: 1,
        bannedUntil: 0,
        limits,
      }),
    ).toMatchObject({ retryAfterMs: 60_000 });
  });

  it('marks the refusal that bans', () => {
    expect(
      keyDecision({
        outcome: OUTCOME_LIMITED_BANNED_NOW,
        now: T,
        minuteCount: 60,
        dayCount: 100,
        bannedUntil: T + 900_000,
        limits,
      }),
    ).toMatchObject({ outcome: 'limited', bannedNow: true });
  });

  it('shapes a ban with its end and nothing else', () => {
    expect(
      keyDecision({ outcome: OUTCOME_BANNED, now: T, minuteCount: 0, dayCount: 0, bannedUntil: T + 1234, limits }),
    ).toEqual({ outcome: 'banned', bannedUntil: T + 1234, now: T });
  });

  it('falls back to the minute if a refusal meets limits that have since grown', () => {
    expect(
      keyDecision({ outcome: OUTCOME_LIMITED, now: T, minuteCount: 10, dayCount: 10, bannedUntil: 0, limits }),
    ).toMatchObject({ refusedBy: 'minute', retryAfterMs: 6_411 });
  });
});

describe('keyUsage', () => {
  it('reports a ban only while it lasts', () => {
    expect(keyUsage({ now: T, minuteCount: 5, dayCount: 7, bannedUntil: T + 1, limits })).toEqual({
      minute: { limit: 60, remaining: 55, resetAt: Date.UTC(2026, 2, 14, 9, 27) },
      day: { limit: 1000, remaining: 993, resetAt: Date.UTC(2026, 2, 15) },
      bannedUntil: T + 1,
    });
    expect(keyUsage({ now: T, minuteCount: 5, dayCount: 7, bannedUntil: T, limits }).bannedUntil).toBeNull();
    expect(keyUsage({ now: T, minuteCount: 5, dayCount: 7, bannedUntil: 0, limits }).bannedUntil).toBeNull();
  });
});

describe('banPolicy', () => {
  it('converts to milliseconds and retains state long enough for the longer of window and ban', () => {
    expect(banPolicy({ threshold: 10, windowSeconds: 60, durationSeconds: 900 })).toEqual({
      threshold: 10,
      windowMs: 60_000,
      durationMs: 900_000,
      retainMs: 901_000,
    });
    expect(banPolicy({ threshold: 1, windowSeconds: 3600, durationSeconds: 5 }).retainMs).toBe(3_601_000);
  });

  it('refuses settings that are not positive integers', () => {
    expect(() => banPolicy({ threshold: -1, windowSeconds: 60, durationSeconds: 900 })).toThrow(
      'ban.threshold must be a positive integer (got -1)',
    );
    expect(() => banPolicy({ threshold: 1, windowSeconds: 60, durationSeconds: Number.NaN })).toThrow(
      /ban.durationSeconds/,
    );
  });
});
