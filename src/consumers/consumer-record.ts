import { randomBytes } from 'node:crypto';
import { isBillingDay } from '../limits/windows/month-window';
import { normalisedHiddenWindows } from '../limits/hidden-windows';
import type { ConsumerLimits, ConsumerRecord } from './types';

export const CONSUMER_ID_PATTERN = /^con_[0-9a-f]{24}$/;

export function generateConsumerId(): string {
  return 'con_' + randomBytes(12).toString('hex');
}

export function isConsumerId(value: unknown): value is string {
  return typeof value === 'string' && CONSUMER_ID_PATTERN.test(value);
}

/** Limits with a fixed field order and only the windows set, so equal limits encode alike. */
export function consumerLimitsOf(limits: ConsumerLimits | null | undefined): ConsumerLimits {
  const out: ConsumerLimits = {};
  if (typeof limits?.perMinute === 'number') out.perMinute = limits.perMinute;
  if (typeof limits?.perDay === 'number') out.perDay = limits.perDay;
  if (typeof limits?.perMonth === 'number') out.perMonth = limits.perMonth;
  // Only a list that hides something is kept: a consumer's hidden windows have no plan's to override.
  const hidden = limits?.hiddenWindows === undefined ? null : normalisedHiddenWindows(limits.hiddenWindows);
  if (hidden !== null && hidden.length > 0) out.hiddenWindows = hidden;
  return out;
}

/** JSON with a fixed field order (the Redis store and the durable copy compare encodings). */
export function encodeConsumer(record: ConsumerRecord): string {
  return JSON.stringify({
    id: record.id,
    name: record.name,
    limits: consumerLimitsOf(record.limits),
    billingDay: record.billingDay,
    allowedOperations: record.allowedOperations,
    allowedAddresses: record.allowedAddresses,
    createdAt: record.createdAt,
    updatedAt: record.updatedAt,
  });
}

function stringList(value: unknown, field: string): string[] | null {
  if (value === null || value === undefined) return null;
  if (!Array.isArray(value) || value.some((v) => typeof v !== 'string'))
    throw new Error(`corrupt consumer record: ${field}`);
  return [...(value as string[])];
}

function positiveOrAbsent(value: unknown): boolean {
  return value === undefined || (typeof value === 'number' && Number.isSafeInteger(value) && value >= 1);
}

/** Parses what encodeConsumer wrote (or an export line's fields); anything else throws. */
export function decodeConsumer(value: string | Record<string, unknown>): ConsumerRecord {
  const v = (typeof value === 'string' ? JSON.parse(value) : value) as Record<string, unknown>;
  const str = (field: string, pattern?: RegExp): string => {
    const s = v[field];
    if (typeof s !== 'string' || s.length === 0 || (pattern && !pattern.test(s)))
      throw new Error(`corrupt consumer record: ${field}`);
    return s;
  };
  const limits = (v.limits ?? {}) as Record<string, unknown>;
  const hiddenOk = limits.hiddenWindows === undefined || normalisedHiddenWindows(limits.hiddenWindows) !== null;
  if (
    typeof limits !== 'object' ||
    !positiveOrAbsent(limits.perMinute) ||
    !positiveOrAbsent(limits.perDay) ||
    !positiveOrAbsent(limits.perMonth) ||
    !hiddenOk
  ) {
    throw new Error('corrupt consumer record: limits');
  }
  if (!isBillingDay(v.billingDay)) throw new Error('corrupt consumer record: billingDay');
  return {
    id: str('id', CONSUMER_ID_PATTERN),
    name: str('name'),
    limits: consumerLimitsOf(limits as ConsumerLimits),
    billingDay: v.billingDay,
    allowedOperations: stringList(v.allowedOperations, 'allowedOperations'),
    allowedAddresses: stringList(v.allowedAddresses, 'allowedAddresses'),
    createdAt: str('createdAt'),
    updatedAt: str('updatedAt'),
  };
}

/** Oldest first, ties by id: the order `list()` returns in both stores. */
export function byCreation(a: ConsumerRecord, b: ConsumerRecord): number {
  if (a.createdAt !== b.createdAt) return a.createdAt < b.createdAt ? -1 : 1;
  return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
}
