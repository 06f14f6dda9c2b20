import type { KeyRef } from './types';

/** The limiter's reference to a key record's windows: its id and its consumer's, if any. */
export function keyRefOf(record: { id: string; consumerId?: string | null }): KeyRef {
  return record.consumerId ? { keyId: record.id, consumerId: record.consumerId } : { keyId: record.id };
}
