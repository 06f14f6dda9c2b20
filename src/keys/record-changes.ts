import type { WindowLimits } from '../limits/types';
import type { ApiKeyRecord, KeyPatch, KeyRotation } from './types';
import { recordJson, recordOfJson } from './stores/key-record-fields';

export { billingDayOf, consumerIdOf } from './stores/key-record-fields';

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

/** A copy of a key's limits, its hidden windows' list included (a record is never shared with a caller). */
function limitsCopy(limits: WindowLimits): WindowLimits {
  return limits.hiddenWindows === undefined ? { ...limits } : { ...limits, hiddenWindows: [...limits.hiddenWindows] };
}

/**
 * The record after `patch`: `undefined` keeps a field, any other value replaces it, and the result
 * is read back through the record's encoding (stores/key-record-fields.ts), so `null` means what it
 * means there: `limits: null` falls back to the plan's, a null consumer or list is removed.
 */
export function applyPatch(record: ApiKeyRecord, patch: KeyPatch, updatedAt: string): ApiKeyRecord {
  const next: Record<string, unknown> = { ...record, updatedAt };
  for (const [field, value] of Object.entries(patch))
    if (value !== undefined && !NEVER_PATCHED.has(field)) next[field] = value;
  return recordOfJson(recordJson(next as unknown as ApiKeyRecord));
}

/** What a patch never changes: the key's identity, its secrets and its lifecycle (rotate, revoke). */
const NEVER_PATCHED = new Set([
  'id',
  'hash',
  'previousHash',
  'previousKeyExpiresAt',
  'createdAt',
  'updatedAt',
  'revokedAt',
]);

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
  return JSON.stringify(recordJson(record));
}

/** Parses what `encodeRecord` wrote; anything else is a corrupt store and throws. */
export function decodeRecord(text: string): ApiKeyRecord {
  const json = JSON.parse(text) as unknown;
  if (typeof json !== 'object' || json === null || Array.isArray(json))
    throw new Error('corrupt key record: not an object');
  return recordOfJson(json as Record<string, unknown>);
}

/** Oldest first, ties by id: the order `list()` returns in both stores. */
export function byCreation(a: ApiKeyRecord, b: ApiKeyRecord): number {
  if (a.createdAt !== b.createdAt) return a.createdAt < b.createdAt ? -1 : 1;
  return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
}
