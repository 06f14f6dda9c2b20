import { LINE_FIELD_CHECKS, type LineContext } from './key-validation';
import { RECORD_FIELDS, recordJson } from './stores/key-record-fields';
import type { ApiKeyRecord } from './types';
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

/**
 * The fields format 1 wrote first, in its order (the rotation's beside the hash); every other field
 * of the record follows in the encoding's order (stores/key-record-fields.ts).
 */
const LEADING_FIELDS = ['id', 'name', 'plan', 'limits', 'hash', 'previousHash', 'previousKeyExpiresAt'] as const;

/** One export line (no trailing newline): the record's encoding, field order fixed, so equal records export equal lines. */
export function exportLine(record: ApiKeyRecord, prefix: string): string {
  const order = Object.fromEntries(LEADING_FIELDS.map((field) => [field, undefined]));
  return JSON.stringify({ v: EXPORT_FORMAT_VERSION, prefix, ...order, ...recordJson(record) });
}

type Fields = Record<string, unknown>;

/** Every field an export line has (exportLine's): any other is not one a gateway wrote. */
const KEY_LINE_FIELDS = new Set<string>(['v', 'prefix', ...RECORD_FIELDS.map((field) => field.name)]);

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
  const from = v.prefix;
  if (typeof from !== 'string' || from.length === 0) throw new Error('prefix is missing or malformed');
  if (from !== rules.prefix)
    throw new Error(`key of prefix ${from} refused: this gateway issues and accepts ${rules.prefix} keys only`);
  const unknown = Object.keys(v).find((field) => !KEY_LINE_FIELDS.has(field));
  if (unknown !== undefined)
    throw new Error(`unknown field ${JSON.stringify(unknown.slice(0, 60))}: not one an export writes`);
  const context: LineContext = { largestCost: rules.largestCost, now: rules.now ?? Date.now() };
  const fields: Record<string, unknown> = {};
  for (const { name } of RECORD_FIELDS) {
    const value = (LINE_FIELD_CHECKS[name] as (value: unknown, line: LineContext) => unknown)(v[name], context);
    if (value !== undefined) fields[name] = value;
  }
  const record = fields as unknown as ApiKeyRecord;
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
