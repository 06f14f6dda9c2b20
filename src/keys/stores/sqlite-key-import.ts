import { encodeRecord, hashesOf } from '../record-changes';
import { KeyImportConflict, type ApiKeyRecord } from '../types';

/** What an import changes in a store held in maps: the records to write, and how many already match. */
export interface ImportPlan {
  changed: ApiKeyRecord[];
  unchanged: number;
}

/**
 * Checks every record against the store before anything is written (a hash held by another id
 * refuses the whole import, as the Redis store's script does), then sorts them into changed and
 * unchanged by their encoded form, the comparison the Redis store makes.
 */
export function applyImport(
  byId: ReadonlyMap<string, ApiKeyRecord>,
  byHash: ReadonlyMap<string, ApiKeyRecord>,
  records: ApiKeyRecord[],
): ImportPlan {
  for (const record of records) {
    for (const hash of hashesOf(record)) {
      const holder = byHash.get(hash);
      if (holder && holder.id !== record.id) throw new KeyImportConflict(record.id, holder.id);
    }
  }
  const changed: ApiKeyRecord[] = [];
  let unchanged = 0;
  for (const record of records) {
    const current = byId.get(record.id);
    if (current && encodeRecord(current) === encodeRecord(record)) unchanged++;
    else changed.push(record);
  }
  return { changed, unchanged };
}
