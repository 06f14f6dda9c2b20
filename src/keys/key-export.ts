import { billingDayOf, consumerIdOf } from './record-changes';
import { instantOf, validLimits, validName } from './key-validation';
import { accessListsOf, accessListsPatch } from '../access/access-lists';
import type { ApiKeyRecord } from './types';
import { IMPORT_CLOCK_SKEW_MS, MAX_GRACE_SECONDS } from '../shared/constants';
import { LineSplitter, LineTooLongError } from '../shared/line-splitter';

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
    ...accessListsOf(record),
  });
}

const HASH = /^[0-9a-f]{64}$/;
const KEY_ID = /^key_[0-9a-f]{24}$/;
const CONSUMER_ID = /^con_[0-9a-f]{24}$/;

type Fields = Record<string, unknown>;

function text(v: Fields, field: string, shape?: RegExp): string {
  const value = v[field];
  if (typeof value !== 'string' || value.length === 0 || (shape && !shape.test(value)))
    throw new Error(`${field} is missing or malformed`);
  return value;
}

function optional(v: Fields, field: string, shape: RegExp): string | null {
  if (v[field] === null || v[field] === undefined) return null;
  return text(v, field, shape);
}

/** An RFC 3339 instant that exists (2020-13-45T99:99:99Z does not), as the admin API reads one. */
function instant(v: Fields, field: string): string {
  if (instantOf(v[field]) === null) throw new Error(`${field} is missing or not an RFC 3339 instant`);
  return v[field] as string;
}

function optionalInstant(v: Fields, field: string): string | null {
  return v[field] === null || v[field] === undefined ? null : instant(v, field);
}

/** The field's instant (or null) when it is no later than `latest` (ms); `why` says what the bound is. */
function notAfter<T extends string | null>(value: T, field: string, latest: number, why: string): T {
  if (value !== null && instantOf(value)! > latest) throw new Error(`${field} ${value} is ${why}`);
  return value;
}

/** Every field an export line has (exportLine's): any other is not one a gateway wrote. */
const KEY_LINE_FIELDS = new Set([
  'v',
  'prefix',
  'id',
  'name',
  'plan',
  'limits',
  'hash',
  'previousHash',
  'previousKeyExpiresAt',
  'createdAt',
  'updatedAt',
  'revokedAt',
  'expiresAt',
  'billingDay',
  'consumerId',
  'allowedOperations',
  'allowedAddresses',
]);

/** The admin API's own checks, their message without its closing full stop (the line's reason). */
function asAdminApi<T>(check: () => T): T {
  try {
    return check();
  } catch (err) {
    throw new Error((err as Error).message.replace(/\.$/, ''), { cause: err });
  }
}

function limitsField(value: unknown, largestCost: number): ApiKeyRecord['limits'] {
  if (value === null || value === undefined) return null;
  return asAdminApi(() => validLimits(value, largestCost));
}

function billingDayField(value: unknown): { billingDay?: number } {
  try {
    return billingDayOf(value);
  } catch {
    throw new Error('billingDay must be a whole number from 1 to 28');
  }
}

/** What every line is checked against: this environment's prefix, the costs in force, and the caller's own check. */
export interface ImportRules {
  prefix: string;
  /** The largest operation cost in force: a key's own limits may not be below it. */
  largestCost: number;
  /** The import's instant (ms; default: now): what a record says happened may not be after it. */
  now?: number;
  /** Null when the record may be imported, else why not (an unknown plan). */
  check: (record: ApiKeyRecord) => string | null;
}

/** One line → record; throws a plain Error saying what is wrong. */
function parseLine(line: string, rules: ImportRules): ApiKeyRecord {
  let v: Fields;
  try {
    v = JSON.parse(line) as Fields;
  } catch {
    throw new Error('not JSON');
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new Error('not a JSON object');
  if (v.v !== EXPORT_FORMAT_VERSION)
    throw new Error(`unknown format version ${JSON.stringify(v.v)} (this gateway reads ${EXPORT_FORMAT_VERSION})`);
  const from = text(v, 'prefix');
  if (from !== rules.prefix)
    throw new Error(`key of prefix ${from} refused: this gateway issues and accepts ${rules.prefix} keys only`);
  const unknown = Object.keys(v).find((field) => !KEY_LINE_FIELDS.has(field));
  if (unknown !== undefined)
    throw new Error(`unknown field ${JSON.stringify(unknown.slice(0, 60))}: not one an export writes`);
  // What happened (created, changed, revoked) happened by now, give or take another clock's skew;
  // a rotation's old secret ends at most the longest grace after it.
  const now = rules.now ?? Date.now();
  const happened = <T extends string | null>(value: T, field: string) =>
    notAfter(value, field, now + IMPORT_CLOCK_SKEW_MS, 'in the future: no gateway wrote it yet');
  const record: ApiKeyRecord = {
    id: text(v, 'id', KEY_ID),
    name: asAdminApi(() => validName(v.name)),
    plan: text(v, 'plan'),
    limits: limitsField(v.limits, rules.largestCost),
    hash: text(v, 'hash', HASH),
    createdAt: happened(instant(v, 'createdAt'), 'createdAt'),
    updatedAt: happened(instant(v, 'updatedAt'), 'updatedAt'),
    revokedAt: happened(optionalInstant(v, 'revokedAt'), 'revokedAt'),
    expiresAt: optionalInstant(v, 'expiresAt'),
    previousHash: optional(v, 'previousHash', HASH),
    previousKeyExpiresAt: notAfter(
      optionalInstant(v, 'previousKeyExpiresAt'),
      'previousKeyExpiresAt',
      now + MAX_GRACE_SECONDS * 1000 + IMPORT_CLOCK_SKEW_MS,
      `more than the longest rotation grace (${MAX_GRACE_SECONDS} s) ahead`,
    ),
    ...billingDayField(v.billingDay),
    ...(v.consumerId === undefined || v.consumerId === null ? {} : { consumerId: text(v, 'consumerId', CONSUMER_ID) }),
    // Checked as the admin API checks them: the 400's message becomes the line's reason.
    ...asAdminApi(() => accessListsOf(accessListsPatch(v))),
  };
  if ((record.previousHash === null) !== (record.previousKeyExpiresAt === null))
    throw new Error('previousHash and previousKeyExpiresAt go together');
  if (record.previousHash === record.hash) throw new Error('previousHash equals hash');
  return record;
}

/**
 * Reads a backup line by line (a request body as it streams in): each line is checked on arrival,
 * so the first bad one stops the import before anything is written (ImportLineError, 1-based line
 * number). Blank lines are skipped; an id or a hash appearing twice is an error too.
 */
export class ExportReader {
  readonly records: ApiKeyRecord[] = [];
  private readonly ids = new Set<string>();
  private readonly hashes = new Set<string>();
  private lineNumber = 0;

  constructor(private readonly rules: ImportRules) {}

  /** One line of the file, without its newline. */
  add(raw: string): void {
    this.lineNumber++;
    const line = raw.trim();
    if (line === '') return;
    let record: ApiKeyRecord;
    try {
      record = parseLine(line, this.rules);
    } catch (err) {
      throw new ImportLineError(this.lineNumber, (err as Error).message);
    }
    const refusal = this.rules.check(record);
    if (refusal !== null) throw new ImportLineError(this.lineNumber, refusal);
    if (this.ids.has(record.id)) throw new ImportLineError(this.lineNumber, `id ${record.id} appears twice`);
    for (const hash of [record.hash, record.previousHash]) {
      if (hash === null) continue;
      if (this.hashes.has(hash)) throw new ImportLineError(this.lineNumber, 'a hash appears on two lines');
      this.hashes.add(hash);
    }
    this.ids.add(record.id);
    this.records.push(record);
  }
}

/** Every record of a whole file, or an ImportLineError for the first bad line. */
export function parseExport(body: string, rules: ImportRules): ApiKeyRecord[] {
  const reader = new ExportReader(rules);
  for (const line of body.split('\n')) reader.add(line);
  return reader.records;
}

/**
 * The longest line an import reads. The longest valid line is some 7 KB (a 200-character name of
 * escaped control characters, 100 of the longest IPv6 ranges, both hashes); a line far beyond it is
 * not an export's, and is refused before the rest of it is read.
 */
export const MAX_IMPORT_LINE_BYTES = 64 * 1024;

/**
 * The lines of a streamed body (bytes, UTF-8), one at a time, split in one pass
 * (src/shared/line-splitter.ts): the body is never held whole, and the event loop turns between
 * chunks. A line over `maxLineBytes` is an ImportLineError at once, naming it.
 */
export async function* linesOf(
  chunks: AsyncIterable<Buffer | string>,
  maxLineBytes = MAX_IMPORT_LINE_BYTES,
): AsyncGenerator<string> {
  const splitter = new LineSplitter(maxLineBytes);
  try {
    for await (const chunk of chunks)
      yield* splitter.push(typeof chunk === 'string' ? Buffer.from(chunk, 'utf8') : chunk);
    yield* splitter.end();
  } catch (err) {
    if (err instanceof LineTooLongError)
      throw new ImportLineError(err.line, `longer than ${err.maxBytes} bytes (an export's lines are a few KB at most)`);
    throw err;
  }
}
