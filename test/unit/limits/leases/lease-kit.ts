import type { LeaseGrant, LeaseWindow } from '../../../../src/limits/leases/lease';

/** 2026-01-01 00:00:10 UTC, store time: 50 s left in the minute. */
export const STORE_NOW = Date.UTC(2026, 0, 1, 0, 0, 10);
const MINUTE_START = Date.UTC(2026, 0, 1, 0, 0, 0);
const DAY_END = Date.UTC(2026, 0, 2);

/** A grant of `units` counted in a key's minute (limit 1,000) and day, and a consumer's minute. */
export function grant(units: number, overrides: Partial<LeaseGrant> = {}): LeaseGrant {
  const windows: LeaseWindow[] = [
    { name: 'minute', limit: 1_000, remaining: 700, startAt: MINUTE_START, resetAt: MINUTE_START + 60_000 },
    { name: 'day', limit: 100_000, remaining: 90_000, startAt: MINUTE_START, resetAt: DAY_END },
    { name: 'consumer-minute', limit: 2_000, remaining: 1_500, startAt: MINUTE_START, resetAt: MINUTE_START + 60_000 },
  ];
  return { units, windows, storeNow: STORE_NOW, ...overrides };
}
