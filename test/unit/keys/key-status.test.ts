import { keyStatusAt } from '../../../src/keys/key-status';
import type { ApiKeyRecord } from '../../../src/keys/types';

const NOW = Date.UTC(2026, 2, 10, 12);
const record: ApiKeyRecord = {
  id: 'key_0123456789abcdef01234567',
  name: 'n',
  plan: 'free',
  limits: null,
  hash: 'current',
  createdAt: '2026-03-01T00:00:00.000Z',
  updatedAt: '2026-03-01T00:00:00.000Z',
  revokedAt: null,
  expiresAt: null,
  previousHash: null,
  previousKeyExpiresAt: null,
};
const iso = (ms: number) => new Date(ms).toISOString();

describe('keyStatusAt', () => {
  it.each<[string, Partial<ApiKeyRecord>, string, ReturnType<typeof keyStatusAt>]>([
    ['a plain key', {}, 'current', 'valid'],
    ['a key expiring later', { expiresAt: iso(NOW + 1) }, 'current', 'valid'],
    ['a key at its expiry instant', { expiresAt: iso(NOW) }, 'current', 'expired'],
    ['a revoked key, even expired', { revokedAt: iso(NOW - 1), expiresAt: iso(NOW - 1) }, 'current', 'revoked'],
    [
      'the previous secret in its grace period',
      { previousHash: 'old', previousKeyExpiresAt: iso(NOW + 1) },
      'old',
      'valid',
    ],
    ['the previous secret at its end', { previousHash: 'old', previousKeyExpiresAt: iso(NOW) }, 'old', 'expired'],
    [
      'the previous secret of an expired key',
      { previousHash: 'old', previousKeyExpiresAt: iso(NOW + 1), expiresAt: iso(NOW) },
      'old',
      'expired',
    ],
    [
      'the previous secret of a revoked key',
      { previousHash: 'old', previousKeyExpiresAt: iso(NOW + 1), revokedAt: iso(NOW - 1) },
      'old',
      'revoked',
    ],
    ['a hash that is neither', { previousHash: 'old', previousKeyExpiresAt: iso(NOW + 1) }, 'other', 'unknown'],
  ])('%s', (_what, overrides, hash, expected) => {
    expect(keyStatusAt({ ...record, ...overrides }, hash, NOW)).toBe(expected);
  });
});
