import { billingDayOf, consumerIdOf, limitsOf } from './record';
import type { ApiKeyRecord } from './types';

/**
 * The backup format of key records (GET /admin/keys/export, POST /admin/keys/import): NDJSON, one
 * record a line, hashes only. Each line names the key prefix (environment) its keys were issued
 * under: a SHA-256 cannot tell, and a gateway must refuse another environment's keys (staging keys
 * loaded into production would otherwise be accepted by nothing, silently).
 */
export const EXPORT_FORMAT_VERSION = 1;
export const NDJSON_CONTENT_TYPE = 'application/x-ndjson';

/** A line that cannot be imported; `line` is 1-based, as an editor shows it. */
export class ImportLineError extends Error {
  constructor(
    readonly line: number,
    reason: string,
  ) {
    super(`line ${line}: ${reason}`);
    this.name = 'ImportLineError';
  }
}

/** One export line (no trailing newline). Field order fixed, so equal records export equal lines. */
export function exportLine(record: ApiKeyRecord, prefix: string): string {
  return JSON.stringify({
    v: EXPORT_FORMAT_VERSION,
    prefix,
    id: record.id,
    name: record.name,
    plan: record.plan,
    limits: record.limits,
    hash: record.hash,
    previousHash: record.previousHash,
    previousKeyExpiresAt: record.previousKeyExpiresAt,
    createdAt: record.createdAt,
    updatedAt: record.updatedAt,
    revokedAt: record.revokedAt,
    expiresAt: record.expiresAt,
    ...billingDayOf(record.billingDay),
    ...consumerIdOf(record.consumerId),
  });
}

const HASH = /^[0-9a-f]{64}$/;
const KEY_ID = /^key_[0-9a-f]{24}$/;
const CONSUMER_ID = /^con_[0-9a-f]{24}$/;
const INSTANT = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/;

type Fields = Record<string, unknown>;

function text(v: Fields, field: string, shape?: RegExp): string {
  const value = v[field];
  if (typeof value !== 'string' || value.length === 0 || (shape && !shape.test(value))) throw new Error(`${field} is missing or malformed`);
  return value;
}

function optional(v: Fields, field: string, shape: RegExp): string | null {
  if (v[field] === null || v[field] === undefined) return null;
  return text(v, field, shape);
}

function limitsField(value: unknown): ApiKeyRecord['limits'] {
  if (value === null || value === undefined) return null;
  const l = value as Fields;
  const positive = (n: unknown) => typeof n === 'number' && Number.isSafeInteger(n) && n >= 1;
  if (typeof l !== 'object' || !positive(l.perMinute) || !positive(l.perDay) || (l.shadow !== undefined && typeof l.shadow !== 'boolean') || (l.perMonth !== undefined && !positive(l.perMonth))) {
    throw new Error('limits must be null or {perMinute, perDay, perMonth?} of positive integers');
  }
  return limitsOf(l.perMinute as number, l.perDay as number, l.shadow as boolean | undefined, l.perMonth as number | undefined);
}

function billingDayField(value: unknown): { billingDay?: number } {
  try {
    return billingDayOf(value);
  } catch {
    throw new Error('billingDay must be a whole number from 1 to 28');
  }
}

/** One line → record; throws a plain Error saying what is wrong. */
function parseLine(line: string, prefix: string): ApiKeyRecord {
  let v: Fields;
  try {
    v = JSON.parse(line) as Fields;
  } catch {
    throw new Error('not JSON');
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new Error('not a JSON object');
  if (v.v !== EXPORT_FORMAT_VERSION) throw new Error(`unknown format version ${JSON.stringify(v.v)} (this gateway reads ${EXPORT_FORMAT_VERSION})`);
  const from = text(v, 'prefix');
  if (from !== prefix) throw new Error(`key of prefix ${from} refused: this gateway issues and accepts ${prefix} keys only`);
  const record: ApiKeyRecord = {
    id: text(v, 'id', KEY_ID),
    name: text(v, 'name'),
    plan: text(v, 'plan'),
    limits: limitsField(v.limits),
    hash: text(v, 'hash', HASH),
    createdAt: text(v, 'createdAt', INSTANT),
    updatedAt: text(v, 'updatedAt', INSTANT),
    revokedAt: optional(v, 'revokedAt', INSTANT),
    expiresAt: optional(v, 'expiresAt', INSTANT),
    previousHash: optional(v, 'previousHash', HASH),
    previousKeyExpiresAt: optional(v, 'previousKeyExpiresAt', INSTANT),
    ...billingDayField(v.billingDay),
    ...(v.consumerId === undefined || v.consumerId === null ? {} : { consumerId: text(v, 'consumerId', CONSUMER_ID) }),
  };
  if ((record.previousHash === null) !== (record.previousKeyExpiresAt === null)) throw new Error('previousHash and previousKeyExpiresAt go together');
  if (record.previousHash === record.hash) throw new Error('previousHash equals hash');
  return record;
}

/**
 * Every record of an export, or an ImportLineError for the first bad line (so nothing is imported).
 * Blank lines are skipped; an id or a hash appearing twice is an error too.
 */
export function parseExport(body: string, prefix: string, check: (record: ApiKeyRecord) => string | null = () => null): ApiKeyRecord[] {
  const records: ApiKeyRecord[] = [];
  const ids = new Set<string>();
  const hashes = new Set<string>();
  const lines = body.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!.trim();
    if (line === '') continue;
    let record: ApiKeyRecord;
    try {
      record = parseLine(line, prefix);
    } catch (err) {
      throw new ImportLineError(i + 1, (err as Error).message);
    }
    const refusal = check(record);
    if (refusal !== null) throw new ImportLineError(i + 1, refusal);
    if (ids.has(record.id)) throw new ImportLineError(i + 1, `id ${record.id} appears twice`);
    for (const hash of [record.hash, record.previousHash]) {
      if (hash === null) continue;
      if (hashes.has(hash)) throw new ImportLineError(i + 1, 'a hash appears on two lines');
      hashes.add(hash);
    }
    ids.add(record.id);
    records.push(record);
  }
  return records;
}
