import type { ApiKeyRecord } from '../types';

/**
 * A revoked key stays revoked (CONTRACT §4): an older backup, taken before the revocation, brings
 * every other field to its state but keeps the revocation where it is. Returns the records to write.
 */
export function keepRevocations(records: readonly ApiKeyRecord[], current: (id: string) => ApiKeyRecord | null | undefined): ApiKeyRecord[] {
  return records.map((record) => {
    const now = current(record.id);
    return now && now.revokedAt !== null && record.revokedAt === null ? { ...record, revokedAt: now.revokedAt } : record;
  });
}
