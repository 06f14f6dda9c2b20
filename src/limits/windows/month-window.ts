import { DEFAULT_BILLING_DAY, MAX_BILLING_DAY, MIN_BILLING_DAY } from '../../shared/constants';
import type { MonthWindowState } from '../types';

/**
 * The month window's calendar (CONTRACT §4): a key's month starts at 00:00 UTC on its billing day
 * (1..28, so every month has one) and ends at 00:00 UTC on that day of the next month. Months have
 * 28 to 31 days, so unlike the minute and the day a month is not a fixed number of milliseconds.
 */

export interface MonthSpan {
  /** Epoch ms the month holding the instant started. */
  start: number;
  /** Epoch ms it ends, which is when the next one starts. */
  end: number;
}

export function isBillingDay(value: unknown): value is number {
  return Number.isInteger(value) && (value as number) >= MIN_BILLING_DAY && (value as number) <= MAX_BILLING_DAY;
}

/** The billing month holding `now` for a key billed on `billingDay`. */
export function monthSpan(now: number, billingDay: number = DEFAULT_BILLING_DAY): MonthSpan {
  if (!isBillingDay(billingDay))
    throw new RangeError(`billingDay must be an integer ${MIN_BILLING_DAY}..${MAX_BILLING_DAY} (got ${billingDay})`);
  const date = new Date(now);
  const year = date.getUTCFullYear();
  const month = date.getUTCMonth();
  // Date.UTC carries month -1 and 12 into the neighbouring years.
  const thisMonths = Date.UTC(year, month, billingDay);
  if (now >= thisMonths) return { start: thisMonths, end: Date.UTC(year, month + 1, billingDay) };
  return { start: Date.UTC(year, month - 1, billingDay), end: thisMonths };
}

/** What a store holds of a key's month: the units taken and the credits granted in the month that started at `startAt`. */
export interface MonthCount {
  startAt: number;
  resetAt: number;
  count: number;
  credits: number;
}

export function monthWindowState(perMonth: number, month: MonthCount): MonthWindowState {
  const limit = perMonth + month.credits;
  return {
    limit,
    remaining: month.count >= limit ? 0 : limit - month.count,
    resetAt: month.resetAt,
    startAt: month.startAt,
    credits: month.credits,
  };
}

/**
 * The billing months around the present for every billing day in use, as the strings the Redis
 * script takes: the month before, this month's start and end, and the next month's end. The script
 * picks among them by Redis TIME, so an instance whose clock is a little off still counts into the
 * month Redis is in; this process only recomputes them when its own clock leaves the month.
 */
export class MonthBoundaries {
  private readonly byDay = new Map<number, { start: number; end: number; argv: readonly string[] }>();

  argv(now: number, billingDay: number): readonly string[] {
    const cached = this.byDay.get(billingDay);
    if (cached !== undefined && now >= cached.start && now < cached.end) return cached.argv;
    const span = monthSpan(now, billingDay);
    const previous = monthSpan(span.start - 1, billingDay);
    const next = monthSpan(span.end, billingDay);
    const argv = [String(previous.start), String(span.start), String(span.end), String(next.end)];
    this.byDay.set(billingDay, { start: span.start, end: span.end, argv });
    return argv;
  }
}
