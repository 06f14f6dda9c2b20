import { ApiError } from '../shared/errors';
import type { WindowLimits } from '../limits/types';
import { isBillingDay } from '../limits/windows/month-window';
import { MAX_BILLING_DAY, MIN_BILLING_DAY } from '../shared/constants';
import { limitsBelowCost } from '../shared/config/costs';
import { limitsOf } from './record-changes';
import { normalisedHiddenWindows } from '../limits/hidden-windows';

/**
 * What a key record's fields must be, for the admin API's writes and for a backup's import alike
 * (CONTRACT §4: an import validates each record as the admin API does). Each check throws
 * ApiError('validation_failed') saying what is wrong.
 */

export const MAX_NAME_LENGTH = 200;

function invalid(message: string): ApiError {
  return new ApiError('validation_failed', message);
}

/**
 * A lone surrogate is not text at all: it cannot be written as UTF-8, so SQLite, Redis and a backup
 * file would each change it (the probe's import failed half-way on one). With the u flag a pair is
 * one code point, so only a lone half matches. Control characters stay accepted, as they always
 * were for the admin API: every place that shows a name escapes them (the CLI, the console).
 */
const LONE_SURROGATE = /[\uD800-\uDFFF]/u;

export function validName(name: unknown): string {
  if (typeof name !== 'string') throw invalid('name must be a string.');
  const trimmed = name.trim();
  if (trimmed.length < 1 || trimmed.length > MAX_NAME_LENGTH) {
    throw invalid(`name must be 1 to ${MAX_NAME_LENGTH} characters.`);
  }
  if (LONE_SURROGATE.test(trimmed)) throw invalid('name must be text (it holds a lone surrogate).');
  return trimmed;
}

const LIMIT_FIELDS = new Set(['perMinute', 'perDay', 'perMonth', 'shadow', 'maxInFlight', 'hiddenWindows']);
/** CONTRACT §3: a key's or plan's maxInFlight is 1..10,000. */
const MAX_IN_FLIGHT_LIMIT = 10_000;

export function validLimits(limits: unknown, largestCost: number): WindowLimits {
  const l = limits as Partial<WindowLimits> | null;
  if (typeof l !== 'object' || l === null || Array.isArray(l)) {
    throw invalid('limits must be an object {perMinute, perDay, perMonth?}.');
  }
  for (const field of ['perMinute', 'perDay', 'perMonth'] as const) {
    const value = l[field];
    if (field === 'perMonth' && value === undefined) continue;
    if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 1) {
      throw invalid(`limits.${field} must be a positive integer.`);
    }
  }
  if (l.shadow !== undefined && typeof l.shadow !== 'boolean') throw invalid('limits.shadow must be true or false.');
  const maxInFlight = l.maxInFlight;
  if (
    maxInFlight !== undefined &&
    (typeof maxInFlight !== 'number' ||
      !Number.isSafeInteger(maxInFlight) ||
      maxInFlight < 1 ||
      maxInFlight > MAX_IN_FLIGHT_LIMIT)
  ) {
    throw invalid(`limits.maxInFlight must be a whole number from 1 to ${MAX_IN_FLIGHT_LIMIT}.`);
  }
  const hiddenWindows =
    l.hiddenWindows === undefined ? undefined : validHiddenWindows(l.hiddenWindows, 'limits.hiddenWindows');
  const extra = Object.keys(l).filter((k) => !LIMIT_FIELDS.has(k));
  if (extra.length > 0) throw invalid(`limits has unknown field ${extra[0]}.`);
  // A request takes its cost of every window or nothing: a window below the largest cost could never serve it.
  const short = limitsBelowCost(l, largestCost);
  if (short.length > 0)
    throw invalid(
      `limits below the largest operation cost ${largestCost} (config costs) could never serve it: ${short.join(', ')}.`,
    );
  return limitsOf(l.perMinute!, l.perDay!, l.shadow, l.perMonth, maxInFlight, hiddenWindows);
}

/** A list of window names (CONTRACT §4: `minute`, `day`, `month`), kept in canonical order without repeats. */
export function validHiddenWindows(value: unknown, field: string) {
  const hidden = normalisedHiddenWindows(value);
  if (hidden === null) throw invalid(`${field} must be a list of window names: minute, day, month.`);
  return hidden;
}

export function validBillingDay(value: unknown): number | undefined {
  if (value === undefined || value === null) return undefined;
  if (!isBillingDay(value))
    throw invalid(`billingDay must be a whole number from ${MIN_BILLING_DAY} to ${MAX_BILLING_DAY}.`);
  return value;
}

/** RFC 3339 with a zone (Z or ±hh:mm), the shape `expiresAt` must have. */
const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/i;

/** Date.parse rolls 2030-02-31 over into March; RFC 3339 says such a date does not exist. */
function realCalendarDate(value: string): boolean {
  const [y, m, d, h, min, sec] = [0, 5, 8, 11, 14, 17].map((at) => Number(value.slice(at, at === 0 ? 4 : at + 2)));
  const day = new Date(Date.UTC(y!, m! - 1, d!));
  return day.getUTCMonth() === m! - 1 && day.getUTCDate() === d && h! <= 23 && min! <= 59 && sec! <= 59;
}

/** An RFC 3339 instant that exists on the calendar; the parsed milliseconds, or null when it is not one. */
export function instantOf(value: unknown): number | null {
  if (typeof value !== 'string' || !RFC3339.test(value) || !realCalendarDate(value)) return null;
  const at = Date.parse(value);
  return Number.isNaN(at) ? null : at;
}

/** A future RFC 3339 instant, normalised to ISO UTC. */
export function validExpiry(value: unknown, now: number): string {
  const at = instantOf(value);
  if (at === null) throw invalid('expiresAt must be an RFC 3339 instant such as 2030-01-31T00:00:00Z.');
  if (at <= now) throw invalid('expiresAt must be in the future.');
  return new Date(at).toISOString();
}
