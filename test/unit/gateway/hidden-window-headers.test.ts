import { bannedRateLimitHeaders, keyRateLimitHeaders, type KeyWindows } from '../../../src/gateway/rate-limit-headers';
import { keyRateLimited, anonymousRateLimited } from '../../../src/gateway/refusals';
import {
  consumerHiddenWindows,
  hiddenWindowsOf,
  isHidden,
  NONE_HIDDEN,
  normalisedHiddenWindows,
  ownHiddenWindows,
} from '../../../src/limits/hidden-windows';
import { PlanBook } from '../../../src/limits/plan-limits';
import type { ConsumerShare, MonthWindowState, WindowState } from '../../../src/limits/types';
import { errorBodyWith } from '../../../src/shared/errors';

const NOW = Date.UTC(2026, 0, 10, 12, 30, 15, 250);
const MINUTE_END = Date.UTC(2026, 0, 10, 12, 31);
const DAY_END = Date.UTC(2026, 0, 11);
const MONTH_START = Date.UTC(2026, 0, 1);
const MONTH_END = Date.UTC(2026, 1, 1);
const DAY_T = Math.ceil((DAY_END - NOW) / 1000);
const MONTH_T = Math.ceil((MONTH_END - NOW) / 1000);

const minute = (remaining: number, limit = 60): WindowState => ({ limit, remaining, resetAt: MINUTE_END });
const day = (remaining: number, limit = 1000): WindowState => ({ limit, remaining, resetAt: DAY_END });
const month = (remaining: number, limit = 20_000): MonthWindowState => ({
  limit,
  remaining,
  resetAt: MONTH_END,
  startAt: MONTH_START,
  credits: 0,
});
const hiding = (...names: Array<'minute' | 'day' | 'month'>) => ownHiddenWindows(names);
const share = (hiddenWindows?: Array<'minute' | 'day' | 'month'>): ConsumerShare => ({
  id: 'con_1',
  limits: { perMinute: 100, perDay: 5000, hiddenWindows },
  billingDay: 1,
});

/** A key with every kind of window: its own three and its consumer's three. */
const everyWindow: KeyWindows = {
  minute: minute(50),
  day: day(900),
  month: month(19_000),
  consumer: { minute: minute(80, 100), day: day(4000, 5000), month: month(90_000, 100_000) },
  now: NOW,
};

describe('rate-limit headers with hidden windows (CONTRACT §4)', () => {
  it('a hidden minute is named and counted in no header: only the day shows', () => {
    expect(keyRateLimitHeaders({ minute: minute(3), day: day(900), now: NOW }, hiding('minute'))).toEqual({
      'X-RateLimit-Limit': '1000',
      'X-RateLimit-Remaining': '900',
      'X-RateLimit-Reset': String(DAY_END / 1000),
      'RateLimit-Policy': '"day";q=1000;w=86400',
      RateLimit: `"day";r=900;t=${DAY_T}`,
    });
  });

  it('a refusal by a hidden window shows the visible windows only, the closest to exhaustion in X-RateLimit-*', () => {
    const headers = keyRateLimitHeaders(
      { minute: minute(0), day: day(900), month: month(500), now: NOW, refusedBy: 'minute' },
      hiding('minute'),
    );
    expect(headers).toEqual({
      'X-RateLimit-Limit': '20000',
      'X-RateLimit-Remaining': '500',
      'X-RateLimit-Reset': String(MONTH_END / 1000),
      'RateLimit-Policy': `"day";q=1000;w=86400, "month";q=20000;w=${(MONTH_END - MONTH_START) / 1000}`,
      RateLimit: `"day";r=900;t=${DAY_T}, "month";r=500;t=${MONTH_T}`,
    });
    expect(JSON.stringify(headers)).not.toContain('minute');
  });

  it('a refusal by a visible window still shows that window while another is hidden', () => {
    const headers = keyRateLimitHeaders(
      { minute: minute(0), day: day(0), now: NOW, refusedBy: 'day' },
      hiding('minute'),
    );
    expect(headers['X-RateLimit-Reset']).toBe(String(DAY_END / 1000));
    expect(headers['X-RateLimit-Remaining']).toBe('0');
  });

  it('every window hidden: no rate-limit header at all', () => {
    expect(
      keyRateLimitHeaders(
        { minute: minute(0), day: day(0), month: month(0), now: NOW, refusedBy: 'day' },
        hiding('minute', 'day', 'month'),
      ),
    ).toEqual({});
    const withConsumer = { ...everyWindow, consumer: { minute: minute(1, 100) } };
    expect(
      keyRateLimitHeaders(withConsumer, hiding('minute', 'day', 'month') | consumerHiddenWindows(share(['minute']))),
    ).toEqual({});
  });

  it("a consumer's hidden minute hides consumer-minute, and the key's own minute stays", () => {
    const hidden = consumerHiddenWindows(share(['minute']));
    const headers = keyRateLimitHeaders(
      { ...everyWindow, consumer: { minute: minute(1, 100), day: day(4000, 5000) } },
      hidden,
    );
    expect(headers['RateLimit-Policy']).toBe(
      `"minute";q=60;w=60, "day";q=1000;w=86400, "month";q=20000;w=${(MONTH_END - MONTH_START) / 1000}, "consumer-day";q=5000;w=86400`,
    );
    expect(headers.RateLimit).not.toContain('consumer-minute');
    // consumer-minute has 1 left but is hidden: X-RateLimit-* shows the visible minute (50 left).
    expect(headers['X-RateLimit-Remaining']).toBe('50');
  });

  it('hiding a window the key does not have changes nothing: the same headers as with none hidden', () => {
    const noMonth = {
      minute: minute(7),
      day: day(900),
      now: NOW,
      consumer: { minute: minute(9, 100), day: day(4, 5000), month: month(90_000, 100_000) },
    };
    expect(keyRateLimitHeaders(noMonth, hiding('month'))).toEqual(keyRateLimitHeaders(noMonth, NONE_HIDDEN));
    for (const refusedBy of ['minute', 'day', 'consumer-minute', 'consumer-day', 'consumer-month'] as const) {
      expect(keyRateLimitHeaders({ ...noMonth, refusedBy }, hiding('month'))).toEqual(
        keyRateLimitHeaders({ ...noMonth, refusedBy }),
      );
    }
  });

  it('a banned key shows its visible windows only, nothing available until the ban ends', () => {
    const bannedUntil = NOW + 300_000;
    const monthSpan = { limit: 20_000, startAt: MONTH_START, resetAt: MONTH_END };
    expect(
      bannedRateLimitHeaders(
        { perMinute: 60, perDay: 1000, perMonth: 20_000 },
        bannedUntil,
        NOW,
        monthSpan,
        hiding('minute'),
      ),
    ).toEqual({
      'X-RateLimit-Limit': '1000',
      'X-RateLimit-Remaining': '0',
      'X-RateLimit-Reset': String(Math.ceil(bannedUntil / 1000)),
      'RateLimit-Policy': `"day";q=1000;w=86400, "month";q=20000;w=${(MONTH_END - MONTH_START) / 1000}`,
      RateLimit: '"day";r=0;t=300, "month";r=0;t=300',
    });
    expect(
      bannedRateLimitHeaders({ perMinute: 60, perDay: 1000 }, bannedUntil, NOW, undefined, hiding('minute', 'day')),
    ).toEqual({});
  });
});

describe('which windows are hidden', () => {
  const plans = new PlanBook({
    free: { perMinute: 60, perDay: 1000, hiddenWindows: ['minute'] },
    pro: { perMinute: 300, perDay: 10_000 },
  });

  it("a key follows its plan's list unless its own limits carry one; an empty list shows every window", () => {
    expect(isHidden(plans.hiddenWindowsOf({ plan: 'free', limits: null }, undefined), 'minute')).toBe(true);
    expect(
      isHidden(plans.hiddenWindowsOf({ plan: 'free', limits: { perMinute: 5, perDay: 10 } }, undefined), 'minute'),
    ).toBe(true);
    expect(
      plans.hiddenWindowsOf({ plan: 'free', limits: { perMinute: 5, perDay: 10, hiddenWindows: [] } }, undefined),
    ).toBe(NONE_HIDDEN);
    const own = plans.hiddenWindowsOf(
      { plan: 'pro', limits: { perMinute: 5, perDay: 10, hiddenWindows: ['day'] } },
      undefined,
    );
    expect([isHidden(own, 'minute'), isHidden(own, 'day')]).toEqual([false, true]);
    expect(plans.hiddenWindowsOf({ plan: 'pro', limits: null }, undefined)).toBe(NONE_HIDDEN);
  });

  it("a consumer's list hides its consumer-* windows, never the key's own", () => {
    const hidden = hiddenWindowsOf(null, NONE_HIDDEN, share(['minute', 'month']));
    expect(
      ['minute', 'day', 'month', 'consumer-minute', 'consumer-day', 'consumer-month'].filter((w) =>
        isHidden(hidden, w as never),
      ),
    ).toEqual(['consumer-minute', 'consumer-month']);
  });

  it('a list is kept in canonical order without repeats; anything but window names is no list', () => {
    expect(normalisedHiddenWindows(['month', 'minute', 'month'])).toEqual(['minute', 'month']);
    expect(normalisedHiddenWindows([])).toEqual([]);
    expect(normalisedHiddenWindows(['hour'])).toBeNull();
    expect(normalisedHiddenWindows('minute')).toBeNull();
  });
});

describe('the 429 rate_limited body names its window (CONTRACT §3)', () => {
  it('each window by its header name; a hidden one as "hidden", its message naming none', () => {
    for (const window of ['minute', 'day', 'month', 'consumer-minute', 'consumer-day', 'consumer-month'] as const) {
      expect(keyRateLimited(window, '5').fields).toEqual({ window });
    }
    const hidden = keyRateLimited('minute', '42', true);
    expect(hidden.fields).toEqual({ window: 'hidden' });
    expect(hidden.headers).toEqual({ 'Retry-After': '42' });
    expect(hidden.message).not.toMatch(/minute|day|month/);
    expect(anonymousRateLimited('3').fields).toEqual({ window: 'anonymous' });
  });

  it('the field follows {code, message, status} and never replaces one of them', () => {
    expect(JSON.stringify(errorBodyWith('rate_limited', 'm', 429, { window: 'day' }))).toBe(
      '{"code":"rate_limited","message":"m","status":429,"window":"day"}',
    );
    expect(errorBodyWith('rate_limited', 'm', 429, { code: 'x', status: '1', window: 'day' })).toEqual({
      code: 'rate_limited',
      message: 'm',
      status: 429,
      window: 'day',
    });
  });
});
