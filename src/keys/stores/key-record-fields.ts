import type { WindowLimits } from '../../limits/types';
import { normalisedHiddenWindows } from '../../limits/hidden-windows';
import { isBillingDay } from '../../limits/windows/month-window';
import { DEFAULT_BILLING_DAY } from '../../shared/constants';
import { addColumnIfMissing, type Migration } from '../../shared/sqlite/sqlite-database';
import { accessListsOf } from '../../access/access-lists';
import type { ApiKeyRecord } from '../types';

/**
 * The one encoding of a key record: every field once, with its name in the record's JSON (what
 * Redis holds under each hash, the durable copy, a backup's line) and its columns in keys.sqlite.
 * The JSON (recordJson, recordOfJson), the SQL statements, the schema steps and the export lines
 * are derived from these two tables; a new field is one entry here (docs/storage.md, "Adding a
 * field to a key"). The order is the JSON's: equal records encode to equal strings, which the Redis
 * scripts compare, so a new field goes at the end.
 */

/** A value as a SQLite column holds it, and a row of `api_keys` by column name. */
export type SqlValue = string | number | null;
export type KeyRow = Record<string, SqlValue>;

export interface KeyColumn {
  name: string;
  type: 'TEXT' | 'INTEGER';
  /** The schema version (keys.sqlite's user_version) that added the column; 1: the first release. */
  since: number;
  /** Only columns of the first release have one: a column added later is NULL in every older row. */
  constraint?: string;
  /** The row is found by it (id, created_at): an UPDATE matches on it, never sets it. */
  matched?: true;
}

/** One field of a key's own limits (`limits` of the record), in the order its JSON keeps them. */
export interface LimitField<N extends keyof WindowLimits = keyof WindowLimits> {
  name: N;
  column: KeyColumn;
  /** perMinute and perDay: limits of a key's own always have both (the column of either NULL: none). */
  required?: true;
  /** The value as a record keeps it, or undefined for none (absent, or not a value of this field). */
  kept(value: unknown): unknown;
  /** Default: the value, NULL for none. */
  toColumn?(value: unknown): SqlValue;
  /** Default: the column's value; what it gives goes through `kept`. */
  fromColumn?(value: SqlValue): unknown;
}

const wholeNumber = (value: unknown) => (Number.isSafeInteger(value) ? value : undefined);

const LIMIT_ENTRIES = [
  { name: 'perMinute', required: true, column: { name: 'per_minute', type: 'INTEGER', since: 1 }, kept: wholeNumber },
  { name: 'perDay', required: true, column: { name: 'per_day', type: 'INTEGER', since: 1 }, kept: wholeNumber },
  { name: 'perMonth', column: { name: 'per_month', type: 'INTEGER', since: 4 }, kept: wholeNumber },
  {
    name: 'shadow',
    column: { name: 'shadow', type: 'INTEGER', since: 3 },
    kept: (value) => (typeof value === 'boolean' ? value : undefined),
    toColumn: (value) => (value === undefined ? null : value ? 1 : 0),
    fromColumn: (value) => (value === null ? undefined : value === 1),
  },
  { name: 'maxInFlight', column: { name: 'max_in_flight', type: 'INTEGER', since: 6 }, kept: wholeNumber },
  {
    // Canonical order, repeats dropped; a list naming anything else reads as no list.
    name: 'hiddenWindows',
    column: { name: 'hidden_windows', type: 'TEXT', since: 8 },
    kept: (value) => normalisedHiddenWindows(value) ?? undefined,
    // NULL: the plan decides; '': none hidden; else the names joined by commas.
    toColumn: (value) => (value === undefined ? null : (value as string[]).join(',')),
    fromColumn: (value) => (value === null ? undefined : value === '' ? [] : String(value).split(',')),
  },
] as const satisfies readonly LimitField[];

export const LIMIT_FIELDS: readonly LimitField[] = LIMIT_ENTRIES;

/** Limits with every field in its order and canonical form, the absent ones left out (so equal limits encode alike). */
export function normalisedLimits(given: Partial<WindowLimits> | Record<string, unknown>): WindowLimits {
  const source = given as Record<string, unknown>;
  const limits: Record<string, unknown> = {};
  for (const field of LIMIT_FIELDS) {
    const value = field.required ? source[field.name] : field.kept(source[field.name]);
    if (value !== undefined) limits[field.name] = value;
  }
  return limits as unknown as WindowLimits;
}

/** Limits as a store holds them: the required fields there, every other one absent or a value of its own. */
function isStoredLimits(value: unknown): value is WindowLimits {
  if (typeof value !== 'object' || value === null) return false;
  const v = value as Record<string, unknown>;
  return LIMIT_FIELDS.every((field) =>
    field.required
      ? field.kept(v[field.name]) !== undefined
      : v[field.name] === undefined || field.kept(v[field.name]) !== undefined,
  );
}

/** One field of the record: its JSON (under its own name) and its columns. */
export interface RecordField<N extends keyof ApiKeyRecord = keyof ApiKeyRecord> {
  name: N;
  columns: readonly KeyColumn[];
  /** Table constraints the field's columns keep. */
  checks?: readonly string[];
  /** The JSON value; undefined leaves the field out (an optional field at its default). */
  toJson(record: ApiKeyRecord): unknown;
  /** The record's value from the JSON's; undefined leaves it out; throws for a corrupt one. */
  fromJson(value: unknown): unknown;
  toRow(record: ApiKeyRecord): KeyRow;
  fromRow(row: KeyRow): unknown;
}

function corrupt(what: string): never {
  throw new Error(`corrupt key record: ${what}`);
}

/** A string every record has. */
function text<N extends keyof ApiKeyRecord>(
  name: N,
  column: string,
  constraint: string,
  matched?: true,
): RecordField<N> {
  return {
    name,
    columns: [{ name: column, type: 'TEXT', since: 1, constraint, ...(matched ? { matched } : {}) }],
    toJson: (record) => record[name],
    fromJson: (value) => (typeof value === 'string' ? value : corrupt(`${name} is not a string`)),
    toRow: (record) => ({ [column]: record[name] as string }),
    fromRow: (row) => row[column],
  };
}

/** A string or null. One added after the first release is absent from the JSON written before it: null. */
function textOrNull<N extends keyof ApiKeyRecord>(name: N, column: string, since: number): RecordField<N> {
  return {
    name,
    columns: [{ name: column, type: 'TEXT', since }],
    toJson: (record) => record[name],
    fromJson: (given) => {
      const value = since > 1 ? (given ?? null) : given;
      return value === null || typeof value === 'string' ? value : corrupt(name);
    },
    toRow: (record) => ({ [column]: record[name] as string | null }),
    fromRow: (row) => row[column],
  };
}

/**
 * A field a record carries only away from its default, so records from before it encode as they
 * did: `of` gives `{[name]: value}` or `{}` (and throws for a corrupt value).
 */
function optional<N extends keyof ApiKeyRecord, T extends SqlValue>(
  name: N,
  column: KeyColumn,
  of: (value: unknown) => Partial<Record<N, T>>,
): RecordField<N> {
  return {
    name,
    columns: [column],
    toJson: (record) => of(record[name])[name],
    fromJson: (value) => of(value)[name],
    toRow: (record) => ({ [column.name]: of(record[name])[name] ?? null }),
    fromRow: (row) => of(row[column.name])[name],
  };
}

/** The billing day a record carries, or nothing for the default (the 1st), so that old and new records encode alike. */
export function billingDayOf(value: unknown): { billingDay?: number } {
  if (value === undefined || value === null || value === DEFAULT_BILLING_DAY) return {};
  if (!isBillingDay(value)) corrupt(`billingDay ${JSON.stringify(value)}`);
  return { billingDay: value };
}

/** The consumer a record carries, or nothing for none, so that records without one encode as before consumers existed. */
export function consumerIdOf(value: unknown): { consumerId?: string } {
  if (value === undefined || value === null) return {};
  if (typeof value !== 'string') corrupt(`consumerId ${JSON.stringify(value)}`);
  return { consumerId: value };
}

/** A key's own limits: null follows the plan; one column a limit field (LIMIT_FIELDS). */
const LIMITS: RecordField<'limits'> = {
  name: 'limits',
  columns: LIMIT_FIELDS.map((field) => field.column),
  checks: ['(per_minute IS NULL) = (per_day IS NULL)'],
  toJson: (record) => (record.limits === null ? null : normalisedLimits(record.limits)),
  fromJson: (value) => (value === null ? null : isStoredLimits(value) ? normalisedLimits(value) : corrupt('limits')),
  toRow: (record) =>
    Object.fromEntries(
      LIMIT_FIELDS.map((field) => {
        const value = record.limits?.[field.name];
        return [
          field.column.name,
          record.limits === null ? null : field.toColumn ? field.toColumn(value) : (value ?? null),
        ];
      }),
    ) as KeyRow,
  fromRow: (row) => {
    if (LIMIT_FIELDS.some((field) => field.required && row[field.column.name] === null)) return null;
    const columns = row as Record<string, SqlValue>;
    return normalisedLimits(
      Object.fromEntries(
        LIMIT_FIELDS.map((field) => {
          const value = columns[field.column.name] ?? null;
          return [field.name, field.fromColumn ? field.fromColumn(value) : value];
        }),
      ),
    );
  },
};

/**
 * An access list (src/access): present only when set. Both lists share one column, `access_policy`
 * (JSON of the two, NULL without any), which the first of them writes.
 */
function accessList<N extends 'allowedOperations' | 'allowedAddresses'>(
  name: N,
  writesColumn: boolean,
): RecordField<N> {
  return {
    name,
    columns: writesColumn ? [{ name: 'access_policy', type: 'TEXT', since: 5 }] : [],
    toJson: (record) => accessListsOf({ [name]: record[name] })[name],
    fromJson: (value) => accessListsOf({ [name]: value })[name],
    toRow: (record): KeyRow => {
      if (!writesColumn) return {};
      const lists = accessListsOf(record);
      return { access_policy: lists.allowedOperations || lists.allowedAddresses ? JSON.stringify(lists) : null };
    },
    fromRow: (row) =>
      row.access_policy === null || row.access_policy === undefined
        ? undefined
        : accessListsOf(JSON.parse(String(row.access_policy)) as Record<string, unknown>)[name],
  };
}

/** Every field of a record, in the JSON's order. Redis's scripts read id, hash, previousHash, revokedAt and consumerId by name. */
const RECORD_ENTRIES = [
  text('id', 'id', 'PRIMARY KEY', true),
  text('name', 'name', 'NOT NULL'),
  text('plan', 'plan', 'NOT NULL'),
  LIMITS,
  text('hash', 'hash', 'NOT NULL UNIQUE'),
  text('createdAt', 'created_at', 'NOT NULL', true),
  text('updatedAt', 'updated_at', 'NOT NULL'),
  textOrNull('revokedAt', 'revoked_at', 1),
  textOrNull('expiresAt', 'expires_at', 2),
  textOrNull('previousHash', 'previous_hash', 2),
  textOrNull('previousKeyExpiresAt', 'previous_key_expires_at', 2),
  optional('billingDay', { name: 'billing_day', type: 'INTEGER', since: 4 }, billingDayOf),
  optional('consumerId', { name: 'consumer_id', type: 'TEXT', since: 7 }, consumerIdOf),
  accessList('allowedOperations', true),
  accessList('allowedAddresses', false),
] as const satisfies readonly RecordField[];

export const RECORD_FIELDS: readonly RecordField[] = RECORD_ENTRIES;

/** Every field of the record and of its limits must have its entry: the compiler names one that has none. */
type WithoutEntry<All, Named> = [Exclude<All, Named>] extends [never] ? true : Exclude<All, Named>;
const everyFieldHasAnEntry: WithoutEntry<keyof ApiKeyRecord, (typeof RECORD_ENTRIES)[number]['name']> = true;
const everyLimitHasAnEntry: WithoutEntry<keyof WindowLimits, (typeof LIMIT_ENTRIES)[number]['name']> = true;
void everyFieldHasAnEntry;
void everyLimitHasAnEntry;

/** The record as its JSON holds it (a plain object, fields in order, absent ones left out). */
export function recordJson(record: ApiKeyRecord): Record<string, unknown> {
  const json: Record<string, unknown> = {};
  for (const field of RECORD_FIELDS) {
    const value = field.toJson(record);
    if (value !== undefined) json[field.name] = value;
  }
  return json;
}

/** The record a JSON object holds; throws `corrupt key record: …` for anything a store never wrote. */
export function recordOfJson(json: Record<string, unknown>): ApiKeyRecord {
  const record: Record<string, unknown> = {};
  for (const field of RECORD_FIELDS) {
    const value = field.fromJson(json[field.name]);
    if (value !== undefined) record[field.name] = value;
  }
  return record as unknown as ApiKeyRecord;
}

/** The record's row of `api_keys`, by column. */
export function rowOf(record: ApiKeyRecord): KeyRow {
  return Object.assign({}, ...RECORD_FIELDS.map((field) => field.toRow(record))) as KeyRow;
}

/** The record a row of `api_keys` holds (a column an older file lacks reads as NULL). */
export function recordOfRow(row: KeyRow): ApiKeyRecord {
  const record: Record<string, unknown> = {};
  for (const field of RECORD_FIELDS) {
    const value = field.fromRow(row);
    if (value !== undefined) record[field.name] = value;
  }
  return record as unknown as ApiKeyRecord;
}

export const KEY_TABLE = 'api_keys';

/** Every column of `api_keys`, in the fields' order. */
export const KEY_COLUMNS: readonly KeyColumn[] = RECORD_FIELDS.flatMap((field) => field.columns);

const names = KEY_COLUMNS.map((column) => column.name);
const matchedOn = KEY_COLUMNS.filter((column) => column.matched).map((column) => column.name);
const insertSql = `INSERT INTO ${KEY_TABLE} (${names.join(', ')}) VALUES (${names.map((name) => `@${name}`).join(', ')})`;

/** The statements of the in-process store, each taking a whole row (rowOf) by name. */
export const KEY_SQL = {
  insert: insertSql,
  /** Changes every field but the ones the row is found by; 0 rows changed: the key is not there. */
  update: `UPDATE ${KEY_TABLE} SET ${names
    .filter((name) => !matchedOn.includes(name))
    .map((name) => `${name} = @${name}`)
    .join(', ')} WHERE ${matchedOn.map((name) => `${name} = @${name}`).join(' AND ')}`,
  /** An import's write: the record as given, created or replaced whole. */
  upsert: `${insertSql} ON CONFLICT(id) DO UPDATE SET ${names
    .filter((name) => name !== 'id')
    .map((name) => `${name} = excluded.${name}`)
    .join(', ')}`,
};

/** `api_keys` as the first release made it: its columns since 1. */
function firstTableSql(): string {
  const first = KEY_COLUMNS.filter((column) => column.since === 1).map((column) =>
    [column.name, column.type, column.constraint].filter(Boolean).join(' '),
  );
  const checks = RECORD_FIELDS.flatMap((field) => field.checks ?? []).map((check) => `CHECK (${check})`);
  return `CREATE TABLE IF NOT EXISTS ${KEY_TABLE} (\n  ${[...first, ...checks].join(',\n  ')}\n) STRICT`;
}

/**
 * The schema of keys.sqlite, one step a version: 1 makes the table (and what `first` adds), each
 * later one adds the columns of that version, NULL in every older row. Files made before the steps
 * were numbered (user_version 0) may hold any prefix of it: every step is harmless on them.
 */
export function keyTableMigrations(first: { description: string; up(db: Parameters<Migration['up']>[0]): void }) {
  const latest = Math.max(...KEY_COLUMNS.map((column) => column.since));
  const steps: Migration[] = [
    {
      version: 1,
      description: first.description,
      up(db) {
        db.exec(firstTableSql());
        first.up(db);
      },
    },
  ];
  for (let version = 2; version <= latest; version++) {
    const added = KEY_COLUMNS.filter((column) => column.since === version);
    steps.push({
      version,
      description: `${KEY_TABLE}: ${added.map((column) => column.name).join(', ')}, NULL for every key before`,
      up(db) {
        for (const column of added) addColumnIfMissing(db, KEY_TABLE, column.name, column.type);
      },
    });
  }
  return steps;
}
