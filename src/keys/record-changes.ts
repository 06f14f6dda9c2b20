import type { WindowLimits, WindowName } from '../limits/types';
import { normalisedHiddenWindows } from '../limits/hidden-windows';
import { isBillingDay } from '../limits/windows/month-window';
import { DEFAULT_BILLING_DAY } from '../shared/constants';
import type { ApiKeyRecord, KeyPatch, KeyRotation } from './types';
import { accessListsOf } from '../access/access-lists';

/**
 * Record helpers both stores share, so a patch or a revocation means the same thing whichever store
 * holds the key.
 */

/** A record as the admin API may show it: everything but the hashes. */
export type PublicKeyRecord = Omit<ApiKeyRecord, 'hash' | 'previousHash'>;

/**
 * Stores return records with `hash` (the resolver and the service need it); the admin layer must
 * never send it. This is the one place that drops it.
 */
export function withoutHash(record: ApiKeyRecord): PublicKeyRecord {
  const { hash: _hash, previousHash: _previousHash, ...rest } = record;
  return rest;
}

export function copyRecord(record: ApiKeyRecord): ApiKeyRecord {
  return { ...record, limits: record.limits ? limitsCopy(record.limits) : null };
}

/**
 * `{perMinute, perDay}`, plus `perMonth` only when the key has a month window, `shadow`,
 * `maxInFlight` and `hiddenWindows` only when the key sets them (absent: the plan decides). Field
 * order fixed, and hidden windows in their canonical order, so equal limits encode alike.
 */
export function limitsOf(
  perMinute: number,
  perDay: number,
  shadow: boolean | null | undefined,
  perMonth?: number | null,
  maxInFlight?: number | null,
  hiddenWindows?: readonly WindowName[] | null,
): WindowLimits {
  const limits: WindowLimits = { perMinute, perDay };
  if (typeof perMonth === 'number') limits.perMonth = perMonth;
  if (typeof shadow === 'boolean') limits.shadow = shadow;
  if (typeof maxInFlight === 'number') limits.maxInFlight = maxInFlight;
  const hidden = hiddenWindows === null || hiddenWindows === undefined ? null : normalisedHiddenWindows(hiddenWindows);
  if (hidden !== null) limits.hiddenWindows = hidden;
  return limits;
}

/** A copy of a key's limits, its hidden windows' list included (a record is never shared with a caller). */
function limitsCopy(limits: WindowLimits): WindowLimits {
  return limits.hiddenWindows === undefined ? { ...limits } : { ...limits, hiddenWindows: [...limits.hiddenWindows] };
}

/** The billing day a record carries, or nothing for the default (the 1st), so that old and new records encode alike. */
export function billingDayOf(value: unknown): { billingDay?: number } {
  if (value === undefined || value === null || value === DEFAULT_BILLING_DAY) return {};
  if (!isBillingDay(value)) throw new Error(`corrupt key record: billingDay ${JSON.stringify(value)}`);
  return { billingDay: value };
}

/** The record after `patch`: `undefined` keeps a field, `limits: null` falls back to the plan's. */
export function applyPatch(record: ApiKeyRecord, patch: KeyPatch, updatedAt: string): ApiKeyRecord {
  // consumerId and the lists are set again below: one removed (null) must not survive the spread.
  const { consumerId: _consumerId, allowedOperations: _operations, allowedAddresses: _addresses, ...kept } = record;
  return {
    ...kept,
    name: patch.name ?? record.name,
    plan: patch.plan ?? record.plan,
    limits: patch.limits === undefined ? record.limits : patch.limits === null ? null : limitsCopy(patch.limits),
    expiresAt: patch.expiresAt === undefined ? record.expiresAt : patch.expiresAt,
    updatedAt,
    ...consumerIdOf(patch.consumerId === undefined ? record.consumerId : patch.consumerId),
    ...patchedAccessLists(record, patch),
  };
}

/** The consumer a record carries, or nothing for none, so that records without one encode as before consumers existed. */
export function consumerIdOf(value: unknown): { consumerId?: string } {
  if (value === undefined || value === null) return {};
  if (typeof value !== 'string') throw new Error(`corrupt key record: consumerId ${JSON.stringify(value)}`);
  return { consumerId: value };
}

/** The record's access lists after `patch`: a list sent replaces, null removes, absent keeps. */
function patchedAccessLists(
  record: ApiKeyRecord,
  patch: KeyPatch,
): Pick<ApiKeyRecord, 'allowedOperations' | 'allowedAddresses'> {
  return accessListsOf({
    allowedOperations: patch.allowedOperations === undefined ? record.allowedOperations : patch.allowedOperations,
    allowedAddresses: patch.allowedAddresses === undefined ? record.allowedAddresses : patch.allowedAddresses,
  });
}

/**
 * The record after a rotation: the current secret becomes the previous one (an older previous one is
 * dropped at once); a revoked key is returned unchanged, so the caller can tell a conflict.
 */
export function applyRotate(record: ApiKeyRecord, rotation: KeyRotation, rotatedAt: string): ApiKeyRecord {
  if (record.revokedAt !== null) return record;
  return {
    ...record,
    hash: rotation.hash,
    previousHash: record.hash,
    previousKeyExpiresAt: rotation.previousKeyExpiresAt,
    updatedAt: rotatedAt,
  };
}

/** Every hash that resolves to this record: the current secret's, and the previous one's if any. */
export function hashesOf(record: ApiKeyRecord): string[] {
  return record.previousHash === null ? [record.hash] : [record.hash, record.previousHash];
}

/** The record after revocation; a second revocation keeps the first instant. */
export function applyRevoke(record: ApiKeyRecord, revokedAt: string): ApiKeyRecord {
  if (record.revokedAt !== null) return record;
  return { ...record, revokedAt, updatedAt: revokedAt };
}

/** JSON with a fixed field order, so equal records encode to equal strings (the Redis store compares them). */
export function encodeRecord(record: ApiKeyRecord): string {
  return JSON.stringify({
    id: record.id,
    name: record.name,
    plan: record.plan,
    limits: record.limits
      ? limitsOf(
          record.limits.perMinute,
          record.limits.perDay,
          record.limits.shadow,
          record.limits.perMonth,
          record.limits.maxInFlight,
          record.limits.hiddenWindows,
        )
      : null,
    hash: record.hash,
    createdAt: record.createdAt,
    updatedAt: record.updatedAt,
    revokedAt: record.revokedAt,
    expiresAt: record.expiresAt,
    previousHash: record.previousHash,
    previousKeyExpiresAt: record.previousKeyExpiresAt,
    ...billingDayOf(record.billingDay),
    ...consumerIdOf(record.consumerId),
    ...accessListsOf(record),
  });
}

function isLimits(value: unknown): value is WindowLimits {
  const v = value as Partial<WindowLimits> | null;
  return (
    typeof v === 'object' &&
    v !== null &&
    Number.isSafeInteger(v.perMinute) &&
    Number.isSafeInteger(v.perDay) &&
    (v.shadow === undefined || typeof v.shadow === 'boolean') &&
    (v.perMonth === undefined || Number.isSafeInteger(v.perMonth)) &&
    (v.maxInFlight === undefined || Number.isSafeInteger(v.maxInFlight)) &&
    (v.hiddenWindows === undefined || normalisedHiddenWindows(v.hiddenWindows) !== null)
  );
}

/** Parses what `encodeRecord` wrote; anything else is a corrupt store and throws. */
export function decodeRecord(text: string): ApiKeyRecord {
  const v = JSON.parse(text) as Record<string, unknown>;
  const str = (field: string): string => {
    const value = v[field];
    if (typeof value !== 'string') throw new Error(`corrupt key record: ${field} is not a string`);
    return value;
  };
  if (v.limits !== null && !isLimits(v.limits)) throw new Error('corrupt key record: limits');
  // Lifecycle fields came later: records written before them have none (never expire, never rotated).
  const optional = (field: string): string | null => {
    const value = v[field] ?? null;
    if (value !== null && typeof value !== 'string') throw new Error(`corrupt key record: ${field}`);
    return value;
  };
  if (v.revokedAt !== null && typeof v.revokedAt !== 'string') throw new Error('corrupt key record: revokedAt');
  return {
    id: str('id'),
    name: str('name'),
    plan: str('plan'),
    limits:
      v.limits === null
        ? null
        : limitsOf(
            v.limits.perMinute,
            v.limits.perDay,
            v.limits.shadow,
            v.limits.perMonth,
            v.limits.maxInFlight,
            v.limits.hiddenWindows,
          ),
    hash: str('hash'),
    createdAt: str('createdAt'),
    updatedAt: str('updatedAt'),
    revokedAt: v.revokedAt,
    expiresAt: optional('expiresAt'),
    previousHash: optional('previousHash'),
    previousKeyExpiresAt: optional('previousKeyExpiresAt'),
    ...billingDayOf(v.billingDay),
    ...consumerIdOf(v.consumerId),
    ...accessListsOf(v),
  };
}

/** Oldest first, ties by id: the order `list()` returns in both stores. */
export function byCreation(a: ApiKeyRecord, b: ApiKeyRecord): number {
  if (a.createdAt !== b.createdAt) return a.createdAt < b.createdAt ? -1 : 1;
  return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
}
