import type { ApiKeyRecord } from './types';

/**
 * Whether a record may be used now with the secret whose hash is `hash`. Cheap and pure, so the
 * gateway checks it on every request against the cached record: a key expires on the instant,
 * whatever the cache holds.
 */
export function keyStatusAt(
  record: ApiKeyRecord,
  hash: string,
  now: number,
): 'valid' | 'revoked' | 'expired' | 'unknown' {
  if (record.revokedAt !== null) return 'revoked';
  if (hash !== record.hash) {
    if (hash !== record.previousHash) return 'unknown';
    if (record.previousKeyExpiresAt === null || Date.parse(record.previousKeyExpiresAt) <= now) return 'expired';
  }
  if (record.expiresAt !== null && Date.parse(record.expiresAt) <= now) return 'expired';
  return 'valid';
}
