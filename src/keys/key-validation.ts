import { ApiError } from '../shared/errors';
import type { WindowLimits } from '../limits/types';
import { isBillingDay } from '../limits/windows/month-window';
import { MAX_BILLING_DAY, MIN_BILLING_DAY } from '../shared/constants';
import { limitsBelowCost } from '../shared/config/costs';
import { normalisedHiddenWindows } from '../limits/hidden-windows';
import { billingDayOf, LIMIT_FIELDS, normalisedLimits } from './stores/key-record-fields';
import { accessListsOf, accessListsPatch, validAccessList } from '../access/access-lists';
import { IMPORT_CLOCK_SKEW_MS, MAX_GRACE_SECONDS } from '../shared/constants';
import type { Plans } from '../limits/plan-limits';
import type { ApiKeyRecord, KeyPatch, NewKeyInput } from './types';

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

const LIMIT_NAMES = new Set<string>(LIMIT_FIELDS.map((field) => field.name));
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
  const extra = Object.keys(l).filter((k) => !LIMIT_NAMES.has(k));
  if (extra.length > 0) throw invalid(`limits has unknown field ${extra[0]}.`);
  // A request takes its cost of every window or nothing: a window below the largest cost could never serve it.
  const short = limitsBelowCost(l, largestCost);
  if (short.length > 0)
    throw invalid(
      `limits below the largest operation cost ${largestCost} (config costs) could never serve it: ${short.join(', ')}.`,
    );
  return normalisedLimits({ ...l, hiddenWindows });
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

/** What a backup line's fields are checked against besides themselves (ImportRules of key-export.ts). */
export interface LineContext {
  /** The largest operation cost in force: a key's own limits may not be below it. */
  largestCost: number;
  /** The import's instant (ms): what a record says happened may not be after it. */
  now: number;
}

/** How one field of a backup line is checked: its value as the record keeps it (undefined: absent), or a plain Error saying what is wrong. */
type LineCheck<K extends keyof ApiKeyRecord> = (value: unknown, line: LineContext) => ApiKeyRecord[K] | undefined;

const HASH = /^[0-9a-f]{64}$/;
const KEY_ID = /^key_[0-9a-f]{24}$/;
const CONSUMER_ID = /^con_[0-9a-f]{24}$/;

function lineText(value: unknown, field: string, shape?: RegExp): string {
  if (typeof value !== 'string' || value.length === 0 || (shape && !shape.test(value)))
    throw new Error(`${field} is missing or malformed`);
  return value;
}

/** An RFC 3339 instant that exists (2020-13-45T99:99:99Z does not), or null when the field has none. */
function lineInstant(value: unknown, field: string, optional: boolean): string | null {
  if (optional && (value === null || value === undefined)) return null;
  if (instantOf(value) === null) throw new Error(`${field} is missing or not an RFC 3339 instant`);
  return value as string;
}

/** The instant (or null) when it is no later than `latest` (ms); `why` says what the bound is. */
function notAfter(value: string | null, field: string, latest: number, why: string): string | null {
  if (value !== null && instantOf(value)! > latest) throw new Error(`${field} ${value} is ${why}`);
  return value;
}

/** What happened (created, changed, revoked) happened by now, give or take another clock's skew. */
function happened(value: unknown, field: string, line: LineContext): string {
  const at = lineInstant(value, field, false)!;
  return notAfter(at, field, line.now + IMPORT_CLOCK_SKEW_MS, 'in the future: no gateway wrote it yet')!;
}

/** The admin API's own checks, their message without its closing full stop (the line's reason). */
export function asAdminApi<T>(check: () => T): T {
  try {
    return check();
  } catch (err) {
    throw new Error((err as Error).message.replace(/\.$/, ''), { cause: err });
  }
}

/**
 * Each field of a backup line (key-export.ts), checked as the admin API checks a key (CONTRACT §4),
 * in the fields' order: the first bad one is the line's reason. The compiler names a field of the
 * record without its check.
 */
export const LINE_FIELD_CHECKS: { [K in keyof ApiKeyRecord]-?: LineCheck<K> } = {
  id: (value) => lineText(value, 'id', KEY_ID),
  name: (value) => asAdminApi(() => validName(value)),
  plan: (value) => lineText(value, 'plan'),
  limits: (value, line) =>
    value === null || value === undefined ? null : asAdminApi(() => validLimits(value, line.largestCost)),
  hash: (value) => lineText(value, 'hash', HASH),
  createdAt: (value, line) => happened(value, 'createdAt', line),
  updatedAt: (value, line) => happened(value, 'updatedAt', line),
  revokedAt: (value, line) => (value === null || value === undefined ? null : happened(value, 'revokedAt', line)),
  expiresAt: (value) => lineInstant(value, 'expiresAt', true),
  previousHash: (value) => (value === null || value === undefined ? null : lineText(value, 'previousHash', HASH)),
  // A rotation's old secret ends at most the longest grace after it.
  previousKeyExpiresAt: (value, line) =>
    notAfter(
      lineInstant(value, 'previousKeyExpiresAt', true),
      'previousKeyExpiresAt',
      line.now + MAX_GRACE_SECONDS * 1000 + IMPORT_CLOCK_SKEW_MS,
      `more than the longest rotation grace (${MAX_GRACE_SECONDS} s) ahead`,
    ),
  billingDay: (value) => {
    try {
      return billingDayOf(value).billingDay;
    } catch {
      throw new Error(`billingDay must be a whole number from ${MIN_BILLING_DAY} to ${MAX_BILLING_DAY}`);
    }
  },
  consumerId: (value) =>
    value === undefined || value === null ? undefined : lineText(value, 'consumerId', CONSUMER_ID),
  allowedOperations: (value) =>
    asAdminApi(() => accessListsOf(accessListsPatch({ allowedOperations: value }))).allowedOperations,
  allowedAddresses: (value) =>
    asAdminApi(() => accessListsOf(accessListsPatch({ allowedAddresses: value }))).allowedAddresses,
};

/** What an admin write's checks read besides the value: what is in force at the write. */
export interface AdminWrite {
  /** The plans configured: `plan` must name one. */
  plans: Plans;
  /** The largest operation cost: a key's own limits may not be below it. */
  largestCost: number;
  /** The write's instant (ms): `expiresAt` must be after it. */
  now: number;
  /** Whether a consumer exists (src/consumers): `consumerId` must name one. Absent: none does. */
  consumerExists?: (id: string) => Promise<boolean>;
}

/** A field's value as a record keeps it, or null for none (a PATCH removes the field, a create leaves it at its default). */
type AdminValue<K extends keyof NewKeyInput> = Exclude<ApiKeyRecord[K], undefined> | null;

/**
 * How the admin API checks one field it may set (CONTRACT §4): throws
 * ApiError('validation_failed') saying what is wrong. A create checks every field, an absent one
 * as undefined; a PATCH only those it names.
 */
interface AdminCheck<K extends keyof NewKeyInput> {
  check(value: unknown, write: AdminWrite): AdminValue<K> | Promise<AdminValue<K>>;
  /** Set at creation only: a PATCH does not take it. */
  createOnly?: true;
}

export function validPlan(plan: unknown, plans: Plans): string {
  if (typeof plan !== 'string' || !Object.hasOwn(plans, plan))
    throw invalid(`plan must be one of ${Object.keys(plans).join(', ')}.`);
  return plan;
}

/** A consumer id that exists, or null for none; an unknown one is 400. */
async function validConsumer(value: unknown, write: AdminWrite): Promise<string | null> {
  if (value === undefined || value === null) return null;
  if (typeof value !== 'string' || !(await write.consumerExists?.(value)))
    throw invalid(`consumerId: no consumer with id ${String(value)}.`);
  return value;
}

/**
 * Each field an admin write may set, checked in this order (the first bad one is the 400): what
 * KeyService.create and update derive the record and the patch from. The compiler names a field
 * of NewKeyInput without its check; the field's encoding is its entry in stores/key-record-fields.ts.
 */
export const ADMIN_FIELD_CHECKS: { [K in keyof NewKeyInput]-?: AdminCheck<K> } = {
  name: { check: (value) => validName(value) },
  plan: { check: (value, write) => validPlan(value, write.plans) },
  limits: {
    check: (value, write) => (value === undefined || value === null ? null : validLimits(value, write.largestCost)),
  },
  billingDay: { check: (value) => validBillingDay(value) ?? null, createOnly: true },
  expiresAt: {
    check: (value, write) => (value === undefined || value === null ? null : validExpiry(value, write.now)),
  },
  consumerId: { check: validConsumer },
  allowedOperations: {
    check: (value) => (value === undefined ? null : validAccessList('allowedOperations', value)),
  },
  allowedAddresses: {
    check: (value) => (value === undefined ? null : validAccessList('allowedAddresses', value)),
  },
};

/**
 * The fields of an admin write, each checked by ADMIN_FIELD_CHECKS in its order: for a create,
 * every field (null where it was left out); for a PATCH, those it names and may change. `checked`
 * is told of each field as it passes, for a rule across fields that must come before the later
 * fields' checks.
 */
export async function adminFields(
  given: object,
  write: AdminWrite,
  on: 'create' | 'patch',
  checked?: (field: keyof NewKeyInput, values: KeyPatch) => void,
): Promise<KeyPatch & { billingDay?: number | null }> {
  const input = given as Record<string, unknown>;
  const values: Record<string, unknown> = {};
  for (const [field, entry] of Object.entries(ADMIN_FIELD_CHECKS) as [keyof NewKeyInput, AdminCheck<never>][]) {
    if (on === 'patch' && (entry.createOnly || input[field] === undefined)) continue;
    values[field] = await entry.check(input[field], write);
    checked?.(field, values as KeyPatch);
  }
  return values as KeyPatch;
}
