import type { ApiKeyRecord } from '../../src/keys/types';

/** A key record with every field at a plain default (a fresh, active free key); tests override what they test. */
export function keyRecordFixture(overrides: Partial<ApiKeyRecord> = {}): ApiKeyRecord {
  return {
    id: 'key_0123456789abcdef01234567',
    name: 'test key',
    plan: 'free',
    limits: null,
    hash: 'a'.repeat(64),
    createdAt: '2026-01-01T00:00:00.000Z',
    updatedAt: '2026-01-01T00:00:00.000Z',
    revokedAt: null,
    expiresAt: null,
    previousHash: null,
    previousKeyExpiresAt: null,
    ...overrides,
  };
}
