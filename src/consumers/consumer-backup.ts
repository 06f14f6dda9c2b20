import { EXPORT_FORMAT_VERSION, ImportLineError } from '../keys/key-export';
import type { ImportResult } from '../keys/types';
import { decodeConsumer, encodeConsumer, isConsumerId } from './consumer-record';
import type { ConsumerRecord, ConsumerStore } from './types';

/** What backup and restore need of the key service (admin/key-backup-routes.ts's KeyBackup). */
export interface Backup {
  exportBackup(write: (text: string) => Promise<void>): Promise<void>;
  importBackup(lines: AsyncIterable<string>): Promise<ImportResult>;
}

/** A consumer's line in the backup: the record's fields, marked `kind: "consumer"`. */
export function consumerLine(record: ConsumerRecord): string {
  return JSON.stringify({ v: EXPORT_FORMAT_VERSION, kind: 'consumer', ...(JSON.parse(encodeConsumer(record)) as object) });
}

function parseConsumerLine(line: string, number: number): ConsumerRecord {
  try {
    const { v, kind: _kind, ...fields } = JSON.parse(line) as Record<string, unknown>;
    if (v !== EXPORT_FORMAT_VERSION) throw new Error(`unknown format version ${JSON.stringify(v)}`);
    return decodeConsumer(fields);
  } catch (err) {
    throw new ImportLineError(number, `consumer: ${(err as Error).message}`);
  }
}

/** A line's fields when it is a JSON object; null otherwise (the key reader names a bad line). */
function fieldsOf(line: string): Record<string, unknown> | null {
  try {
    const v = JSON.parse(line) as unknown;
    return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

/** The consumer lines that open a backup (the export writes them first), read off the stream. */
interface BackupHead {
  consumers: ConsumerRecord[];
  /** A blank for each line read, so that a key line keeps its line number. */
  blanks: string[];
  /** The first key line and its number, or null at the end of the stream. */
  firstKeyLine: { line: string; number: number } | null;
}

async function readHead(lines: AsyncIterator<string>): Promise<BackupHead> {
  const head: BackupHead = { consumers: [], blanks: [], firstKeyLine: null };
  const seen = new Set<string>();
  for (let number = 1; ; number++) {
    const next = await lines.next();
    if (next.done) return head;
    const line = next.value.trim();
    if (line !== '' && fieldsOf(line)?.kind !== 'consumer') {
      head.firstKeyLine = { line: next.value, number };
      return head;
    }
    head.blanks.push('');
    if (line === '') continue;
    const record = parseConsumerLine(line, number);
    if (seen.has(record.id)) throw new ImportLineError(number, `consumer ${record.id} appears twice`);
    seen.add(record.id);
    head.consumers.push(record);
  }
}

/**
 * The key lines after the head, each naming a consumer checked against `known`; a consumer line
 * among the keys is refused (the export writes consumers first).
 */
async function* keyLines(head: BackupHead, rest: AsyncIterator<string>, known: ReadonlySet<string>): AsyncGenerator<string> {
  yield* head.blanks;
  if (head.firstKeyLine === null) return;
  let number = head.firstKeyLine.number;
  let line = head.firstKeyLine.line;
  for (;;) {
    const fields = fieldsOf(line.trim());
    if (fields?.kind === 'consumer') throw new ImportLineError(number, 'consumer lines come before the keys');
    const consumerId = fields?.consumerId;
    if (typeof consumerId === 'string' && (!isConsumerId(consumerId) || !known.has(consumerId))) {
      throw new ImportLineError(number, `consumerId ${consumerId} is neither a consumer here nor one in the file`);
    }
    yield line;
    const next = await rest.next();
    if (next.done) return;
    number += 1;
    line = next.value;
  }
}

/**
 * The key backup with consumers in it (CONTRACT §4: consumers are exported and imported like keys):
 * consumer lines first, then the keys. An import reads the consumer lines, writes the consumers,
 * then streams the keys to the key service, refusing a key that names a consumer neither here nor
 * in the file; should the keys be refused (a bad line, a secret held by another id), the consumers
 * are put back as they were, so the import applies whole or not at all.
 */
export function withConsumersInBackup(keys: Backup, consumers: ConsumerStore): Backup {
  return {
    async exportBackup(write) {
      const records = await consumers.list();
      if (records.length > 0) await write(records.map((r) => consumerLine(r) + '\n').join(''));
      await keys.exportBackup(write);
    },
    async importBackup(lines) {
      const iterator = lines[Symbol.asyncIterator]();
      const head = await readHead(iterator);
      const before = new Map((await consumers.list()).map((r) => [r.id, r]));
      const known = new Set([...before.keys(), ...head.consumers.map((r) => r.id)]);
      const changed = head.consumers.filter((r) => encodeConsumer(r) !== (before.has(r.id) ? encodeConsumer(before.get(r.id)!) : ''));
      await consumers.putAll(changed);
      try {
        const result = await keys.importBackup(keyLines(head, iterator, known));
        return { imported: result.imported + changed.length, unchanged: result.unchanged + head.consumers.length - changed.length, ids: [...changed.map((r) => r.id), ...result.ids] };
      } catch (err) {
        await restore(consumers, changed, before);
        throw err;
      }
    },
  };
}

async function restore(consumers: ConsumerStore, changed: readonly ConsumerRecord[], before: ReadonlyMap<string, ConsumerRecord>): Promise<void> {
  const previous = changed.flatMap((r) => (before.has(r.id) ? [before.get(r.id)!] : []));
  await consumers.putAll(previous);
  for (const record of changed) if (!before.has(record.id)) await consumers.delete(record.id);
}
