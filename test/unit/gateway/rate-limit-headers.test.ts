import {
  anonymousRateLimitHeaders,
  bannedRateLimitHeaders,
  bindingWindow,
  jitteredRetryAfterSeconds,
  keyRateLimitHeaders,
} from '../../../src/gateway/rate-limit-headers';
import type { WindowState } from '../../../src/limits/types';

const NOW = Date.UTC(2026, 0, 1, 12, 30, 15, 250);
const MINUTE_END = Date.UTC(2026, 0, 1, 12, 31);
const DAY_END = Date.UTC(2026, 0, 2);

const minute = (remaining: number, limit = 60): WindowState => ({ limit, remaining, resetAt: MINUTE_END });
const day = (remaining: number, limit = 1000): WindowState => ({ limit, remaining, resetAt: DAY_END });

describe('bindingWindow', () => {
  it('is the window with fewest remaining', () => {
    expect(bindingWindow(minute(10), day(9))).toBe('day');
    expect(bindingWindow(minute(9), day(10))).toBe('minute');
  });

  it('is the minute on a tie', () => {
    expect(bindingWindow(minute(0), day(0))).toBe('minute');
    expect(bindingWindow(minute(5), day(5))).toBe('minute');
  });

  it('is the refusing window on a refusal, even when the other shows fewer', () => {
    expect(bindingWindow(minute(0, 60), day(0), 'day')).toBe('day');
    expect(bindingWindow(minute(0), day(0), 'minute')).toBe('minute');
  });
});

describe('keyRateLimitHeaders', () => {
  it('shows the minute and both windows in the draft headers', () => {
    expect(keyRateLimitHeaders({ minute: minute(59), day: day(999), now: NOW })).toEqual({
      'X-RateLimit-Limit': '60',
      'X-RateLimit-Remaining': '59',
      'X-RateLimit-Reset': String(MINUTE_END / 1000),
      'RateLimit-Policy': '"minute";q=60;w=60, "day";q=1000;w=86400',
      // 44.75 s left rounds up: a client never retries early.
      RateLimit: `"minute";r=59;t=45, "day";r=999;t=${Math.ceil((DAY_END - NOW) / 1000)}`,
    });
  });

  it('shows the day in X-RateLimit-* when it has fewer left', () => {
    const headers = keyRateLimitHeaders({ minute: minute(50, 100), day: day(3, 5), now: NOW });
    expect([headers['X-RateLimit-Limit'], headers['X-RateLimit-Remaining'], headers['X-RateLimit-Reset']]).toEqual([
      '5',
      '3',
      String(DAY_END / 1000),
    ]);
  });

  it('on a refusal by the day, X-RateLimit-Reset is midnight', () => {
    const headers = keyRateLimitHeaders({ minute: minute(0, 100), day: day(0, 5), now: NOW, refusedBy: 'day' });
    expect(headers['X-RateLimit-Reset']).toBe(String(DAY_END / 1000));
    expect(headers['X-RateLimit-Remaining']).toBe('0');
  });

  it('rounds a reset instant inside a second up', () => {
    const headers = keyRateLimitHeaders({
      minute: { limit: 1, remaining: 0, resetAt: 1_000_500 },
      day: day(10),
      now: 999_000,
    });
    expect(headers['X-RateLimit-Reset']).toBe('1001');
    expect(headers.RateLimit).toMatch(/^"minute";r=0;t=2,/);
  });

  it('never shows a negative wait', () => {
    const headers = keyRateLimitHeaders({ minute: minute(1), day: day(1), now: MINUTE_END + 5_000 });
    expect(headers.RateLimit).toMatch(/^"minute";r=1;t=0,/);
  });
});

describe('bannedRateLimitHeaders', () => {
  it('has nothing remaining until the ban ends', () => {
    const bannedUntil = NOW + 899_750;
    expect(bannedRateLimitHeaders({ perMinute: 60, perDay: 1000 }, bannedUntil, NOW)).toEqual({
      'X-RateLimit-Limit': '60',
      'X-RateLimit-Remaining': '0',
      'X-RateLimit-Reset': String(Math.ceil(bannedUntil / 1000)),
      'RateLimit-Policy': '"minute";q=60;w=60, "day";q=1000;w=86400',
      RateLimit: '"minute";r=0;t=900, "day";r=0;t=900',
    });
  });
});

describe('anonymousRateLimitHeaders', () => {
  it('describes the one per-address window', () => {
    expect(anonymousRateLimitHeaders({ limit: 30, remaining: 12, resetAt: NOW + 20_000 }, NOW)).toEqual({
      'X-RateLimit-Limit': '30',
      'X-RateLimit-Remaining': '12',
      'X-RateLimit-Reset': String(Math.ceil((NOW + 20_000) / 1000)),
      'RateLimit-Policy': '"anonymous";q=30;w=60',
      RateLimit: '"anonymous";r=12;t=20',
    });
  });
});

describe('keyRateLimitHeaders with a month window', () => {
  const now = Date.UTC(2026, 2, 15, 12, 0, 30);
  const w = (limit: number, remaining: number, resetAt: number) => ({ limit, remaining, resetAt });
  // Billing day 20: February 20 to March 20, 28 days.
  const month = (remaining: number) => ({
    ...w(5000, remaining, Date.UTC(2026, 2, 20)),
    startAt: Date.UTC(2026, 1, 20),
    credits: 0,
  });

  it('adds "month" to both RateLimit headers, with the seconds of this billing month', () => {
    const h = keyRateLimitHeaders({
      minute: w(60, 59, Date.UTC(2026, 2, 15, 12, 1)),
      day: w(1000, 999, Date.UTC(2026, 2, 16)),
      now,
      month: month(4999),
    });
    expect(h['RateLimit-Policy']).toBe('"minute";q=60;w=60, "day";q=1000;w=86400, "month";q=5000;w=2419200');
    expect(h.RateLimit).toBe(
      `"minute";r=59;t=30, "day";r=999;t=43170, "month";r=4999;t=${(Date.UTC(2026, 2, 20) - now) / 1000}`,
    );
    expect(h['X-RateLimit-Limit']).toBe('60');
  });

  it('shows the month in X-RateLimit-* when it has the fewest remaining, or refused', () => {
    const h = keyRateLimitHeaders({ minute: w(60, 59, 0), day: w(1000, 999, 0), now, month: month(3) });
    expect([h['X-RateLimit-Limit'], h['X-RateLimit-Remaining'], h['X-RateLimit-Reset']]).toEqual([
      '5000',
      '3',
      String(Date.UTC(2026, 2, 20) / 1000),
    ]);
    const refused = keyRateLimitHeaders({
      minute: w(60, 59, 0),
      day: w(1000, 999, 0),
      now,
      refusedBy: 'month',
      month: month(0),
    });
    expect(refused['X-RateLimit-Remaining']).toBe('0');
    expect(refused['X-RateLimit-Reset']).toBe(String(Date.UTC(2026, 2, 20) / 1000));
    // A tie goes to the shorter window.
    expect(bindingWindow(w(60, 5, 0), w(1000, 5, 0), undefined, month(5))).toBe('minute');
  });
});

describe('jitteredRetryAfterSeconds', () => {
  it('is the plain wait without jitter, whatever the random source says', () => {
    expect(jitteredRetryAfterSeconds(1_500, 0, () => 0.99)).toBe('2');
    expect(jitteredRetryAfterSeconds(0, 0, () => 0.5)).toBe('1');
  });

  it('adds floor(random * (N + 1)) whole seconds: 0 to N, each equally likely', () => {
    expect([0, 0.16, 0.17, 0.5, 0.84, 0.999999].map((r) => jitteredRetryAfterSeconds(10_000, 5, () => r))).toEqual([
      '10',
      '10',
      '11',
      '13',
      '15',
      '15',
    ]);
  });

  it('never undercuts the wait and never exceeds it by more than N, even for a source that returns 1 or less than 0', () => {
    expect(jitteredRetryAfterSeconds(10_000, 5, () => 1)).toBe('15');
    expect(jitteredRetryAfterSeconds(10_000, 5, () => -0.5)).toBe('10');
  });

  it('spreads refused clients over the whole range with Math.random', () => {
    const seen = new Map<number, number>();
    for (let i = 0; i < 6000; i++) {
      const value = Number(jitteredRetryAfterSeconds(30_000, 5, Math.random));
      seen.set(value, (seen.get(value) ?? 0) + 1);
    }
    expect([...seen.keys()].sort((a, b) => a - b)).toEqual([30, 31, 32, 33, 34, 35]);
    // Uniform: each of the six values about 1000 times (far outside chance if not).
    for (const count of seen.values()) expect(count).toBeGreaterThan(800);
  });
});
