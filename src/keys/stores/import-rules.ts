import { KeyImportConflict, type ApiKeyRecord, type KeyMove } from '../types';

/**
 * A revoked key stays revoked (CONTRACT §4): an older backup, taken before the revocation, brings
 * every other field to its state but keeps the revocation where it is. Returns the records to write.
 */
export function keepRevocations(
  records: readonly ApiKeyRecord[],
  current: (id: string) => ApiKeyRecord | null | undefined,
): ApiKeyRecord[] {
  return records.map((record) => {
    const now = current(record.id);
    return now && now.revokedAt !== null && record.revokedAt === null
      ? { ...record, revokedAt: now.revokedAt }
      : record;
  });
}

/** The records that existed before an import under another consumer (or none) than they name now. */
export function movesOf(
  records: readonly ApiKeyRecord[],
  before: (id: string) => ApiKeyRecord | null | undefined,
): KeyMove[] {
  const moves: KeyMove[] = [];
  for (const record of records) {
    const current = before(record.id);
    if (current && current.consumerId !== record.consumerId)
      moves.push({ id: record.id, from: current.consumerId, to: record.consumerId });
  }
  return moves;
}

/**
 * The consumer an imported record brings a live key into (a new key of a consumer, or one moved to
 * another): the one a deletion under way may have closed (KeyStore.closeConsumer). Null otherwise.
 */
export function consumerEntered(record: ApiKeyRecord, current: ApiKeyRecord | null | undefined): string | null {
  if (record.consumerId === undefined || record.revokedAt !== null) return null;
  return current && current.consumerId === record.consumerId ? null : record.consumerId;
}

/** An import refused because one of its keys enters a consumer being deleted here. */
export function closedConsumerConflict(keyId: string, consumerId: string): KeyImportConflict {
  return new KeyImportConflict(
    keyId,
    keyId,
    `key ${keyId} names consumer ${consumerId}, which is being deleted here; import again once the delete is done`,
  );
}
