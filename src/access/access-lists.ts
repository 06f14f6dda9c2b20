import { ApiError } from '../shared/errors';
import { MAX_ACCESS_LIST_ENTRIES } from '../shared/constants';
import { formatAddressEntry, parseAddressEntry } from '../shared/http/address-entry';
import { isPolicyOperationId, POLICY_OPERATION_IDS } from './operation-ids';

/**
 * The two lists of an access policy (CONTRACT §4) as a key or a consumer record carries them:
 * absent or null, no list (everything allowed on that axis); a list, only what it names.
 */
export interface AccessLists {
  allowedOperations?: readonly string[] | null;
  allowedAddresses?: readonly string[] | null;
}

export type AccessListField = keyof AccessLists;

/** How many bad entries a 400 names at most: enough to fix a list, bounded for a list of garbage. */
const NAMED_AT_MOST = 10;

function invalid(message: string): ApiError {
  return new ApiError('validation_failed', message);
}

function named(entries: readonly unknown[]): string {
  const shown = entries.slice(0, NAMED_AT_MOST).map((entry) => JSON.stringify(entry) ?? String(entry));
  return entries.length > NAMED_AT_MOST
    ? `${shown.join(', ')} and ${entries.length - NAMED_AT_MOST} more`
    : shown.join(', ');
}

/** The list as sent, or a 400 saying what a list must be; the entries themselves are checked by the caller. */
function listOf(field: AccessListField, value: unknown, what: string): unknown[] {
  if (!Array.isArray(value)) throw invalid(`${field} must be an array of ${what}, or null for no list.`);
  // An empty list would let nothing through: almost surely a mistake, and null says "no list" plainly.
  if (value.length === 0) throw invalid(`${field} is empty, which would allow nothing: send null to remove the list.`);
  if (value.length > MAX_ACCESS_LIST_ENTRIES)
    throw invalid(`${field} has ${value.length} entries; at most ${MAX_ACCESS_LIST_ENTRIES} are allowed.`);
  return value;
}

/** Order kept, duplicates dropped: the list as stored, shown and exported. */
function distinct(values: string[]): string[] {
  return [...new Set(values)];
}

function validOperations(value: unknown): string[] {
  const entries = listOf('allowedOperations', value, 'operation ids');
  const bad = entries.filter((entry) => typeof entry !== 'string' || !isPolicyOperationId(entry));
  if (bad.length > 0)
    throw invalid(
      `allowedOperations: unknown operation id ${named(bad)}; the operations are ${POLICY_OPERATION_IDS.join(', ')} (GET /v1/usage is always allowed).`,
    );
  return distinct(entries as string[]);
}

function validAddresses(value: unknown): string[] {
  const entries = listOf('allowedAddresses', value, 'IPv4/IPv6 addresses and CIDR ranges');
  const bad: unknown[] = [];
  const good: string[] = [];
  for (const entry of entries) {
    const parsed = typeof entry === 'string' ? parseAddressEntry(entry) : null;
    if (parsed === null) bad.push(entry);
    else good.push(formatAddressEntry(parsed));
  }
  if (bad.length > 0)
    throw invalid(
      `allowedAddresses: ${named(bad)} ${bad.length === 1 ? 'is not an' : 'are not'} IPv4/IPv6 address or CIDR range (such as 192.0.2.7, 10.0.0.0/8, 2001:db8::/32).`,
    );
  return distinct(good);
}

/**
 * One list as the admin API sent it: null removes the list; anything else must be a non-empty list
 * of at most MAX_ACCESS_LIST_ENTRIES valid entries, or a 400 (validation_failed) naming each bad
 * entry (up to ten). Returns the list as stored: addresses canonical (lower case, IPv4-mapped
 * IPv6 as IPv4), duplicates dropped.
 */
export function validAccessList(field: AccessListField, value: unknown): string[] | null {
  if (value === null) return null;
  return field === 'allowedOperations' ? validOperations(value) : validAddresses(value);
}

/**
 * The fields of an admin write that set access lists: each one sent (null included) checked and
 * kept, each absent one left out, so a PATCH changes only what it names.
 */
export function accessListsPatch(input: { allowedOperations?: unknown; allowedAddresses?: unknown }): {
  allowedOperations?: string[] | null;
  allowedAddresses?: string[] | null;
} {
  const patch: { allowedOperations?: string[] | null; allowedAddresses?: string[] | null } = {};
  if (input.allowedOperations !== undefined)
    patch.allowedOperations = validAccessList('allowedOperations', input.allowedOperations);
  if (input.allowedAddresses !== undefined)
    patch.allowedAddresses = validAccessList('allowedAddresses', input.allowedAddresses);
  return patch;
}

/**
 * The lists a stored record carries, for encoding it (key records, backups): a list present only
 * when set, so records without a policy encode exactly as before policies existed. Throws a plain
 * Error for a value that is not a list of strings (a corrupt record).
 */
export function accessListsOf(value: { allowedOperations?: unknown; allowedAddresses?: unknown }): {
  allowedOperations?: string[];
  allowedAddresses?: string[];
} {
  const lists: { allowedOperations?: string[]; allowedAddresses?: string[] } = {};
  for (const field of ['allowedOperations', 'allowedAddresses'] as const) {
    const list = value[field];
    if (list === undefined || list === null) continue;
    if (!Array.isArray(list) || !list.every((entry) => typeof entry === 'string'))
      throw new Error(`${field} must be a list of strings`);
    lists[field] = [...(list as string[])];
  }
  return lists;
}

/** The lists as the admin API shows them: null where there is none. */
export function accessListsView(record: AccessLists): {
  allowedOperations: string[] | null;
  allowedAddresses: string[] | null;
} {
  return {
    allowedOperations: record.allowedOperations ? [...record.allowedOperations] : null,
    allowedAddresses: record.allowedAddresses ? [...record.allowedAddresses] : null,
  };
}
