import { EXPORT_FORMAT_VERSION, ImportLineError } from '../keys/key-export';
import type { ImportResult } from '../keys/types';
import { encodeConsumer, isConsumerId } from './consumer-record';
import type { ConsumerRecord, ConsumerStore } from './types';

/** What backup and restore need of the key service (admin/key-backup-routes.ts's KeyBackup). */
export interface Backup {
  exportBackup(write: (text: string) => Promise<void>): Promise<void>;
  importBackup(lines: AsyncIterable<string>): Promise<ImportResult>;
}

/**
 * A consumer line's fields (without `v` and `kind`) checked as the admin API checks a consumer
 * (ConsumerService.fromBackup); throws saying what is wrong.
 */
export type ConsumerLineCheck = (fields: Record<string, unknown>) => ConsumerRecord;

/** A consumer's line in the backup: the record's fields, marked `kind: "consumer"`. */
export function consumerLine(record: ConsumerRecord): string {
  return JSON.stringify({
    v: EXPORT_FORMAT_VERSION,
    kind: 'consumer',
    ...(JSON.parse(encodeConsumer(record)) as object),
  });
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

/**
 * The consumers of an import: those here before it, those its lines carry (in any place of the
 * file), and the key lines naming a consumer not seen yet, checked once the whole file is read.
 */
class ConsumersOfImport {
  readonly inFile = new Map<string, ConsumerRecord>();
  /** A consumer id a key line names that is neither here nor (yet) in the file → that key's line. */
  private readonly awaited = new Map<string, number>();

  constructor(
    private readonly here: ReadonlyMap<string, ConsumerRecord>,
    private readonly check: ConsumerLineCheck,
  ) {}

  addConsumerLine(fields: Record<string, unknown>, number: number): void {
    const { v, kind: _kind, ...rest } = fields;
    let record: ConsumerRecord;
    try {
      if (v !== EXPORT_FORMAT_VERSION) throw new Error(`unknown format version ${JSON.stringify(v)}`);
      record = this.check(rest);
    } catch (err) {
      throw new ImportLineError(number, `consumer: ${(err as Error).message.replace(/\.$/, '')}`);
    }
    if (this.inFile.has(record.id)) throw new ImportLineError(number, `consumer ${record.id} appears twice`);
    this.inFile.set(record.id, record);
  }

  /**
   * A key line's consumer must be here or in the file, before the key or after it. A revoked key
   * may name one that is neither: its consumer was deleted once its keys were revoked (CONTRACT §5),
   * and the export that followed must still import (CONTRACT §4). It is imported as exported:
   * refused 401 `revoked_api_key` like any revoked key, its consumer's limits long out of play.
   * A malformed id is left to the key reader, which names it.
   */
  noteKeyLine(fields: Record<string, unknown>, number: number): void {
    const consumerId = fields.consumerId;
    if (
      !isConsumerId(consumerId) ||
      this.here.has(consumerId) ||
      this.inFile.has(consumerId) ||
      this.awaited.has(consumerId)
    )
      return;
    if (fields.revokedAt !== null && fields.revokedAt !== undefined) return;
    this.awaited.set(consumerId, number);
  }

  /** Once every line is read: the first key naming a consumer neither here nor in the file is refused. */
  checkKeysConsumers(): void {
    for (const [consumerId, number] of this.awaited) {
      if (!this.inFile.has(consumerId))
        throw new ImportLineError(number, `consumerId ${consumerId} is neither a consumer here nor one in the file`);
    }
  }

  /** The file's consumers that are new here or here in another state. */
  changed(): ConsumerRecord[] {
    return [...this.inFile.values()].filter(
      (r) => encodeConsumer(r) !== (this.here.has(r.id) ? encodeConsumer(this.here.get(r.id)!) : ''),
    );
  }
}

/**
 * The key lines of a backup for the key service, each consumer line taken out (a blank in its
 * place, so that every key line keeps its number); once the file is read and every key's consumer
 * checked, `whenRead` runs, before the key service writes anything.
 */
async function* keyLinesOf(
  lines: AsyncIterable<string>,
  consumers: ConsumersOfImport,
  whenRead: () => Promise<void>,
): AsyncGenerator<string> {
  let number = 0;
  for await (const raw of lines) {
    number += 1;
    const line = raw.trim();
    const fields = line === '' ? null : fieldsOf(line);
    if (fields?.kind === 'consumer') {
      consumers.addConsumerLine(fields, number);
      yield '';
      continue;
    }
    if (fields) consumers.noteKeyLine(fields, number);
    yield raw;
  }
  consumers.checkKeysConsumers();
  await whenRead();
}

/**
 * The key backup with consumers in it (CONTRACT §4: consumers are exported and imported like keys):
 * the export writes the consumer lines first, then the keys; an import takes them in any order.
 * Every line is checked as it arrives (a consumer line as the admin API checks a consumer); once
 * all are read, the consumers are written, then the key service writes the keys; should the keys
 * be refused then (a secret held by another id), the consumers are put back as they were, so the
 * import applies whole or not at all.
 */
export function withConsumersInBackup(keys: Backup, consumers: ConsumerStore, check: ConsumerLineCheck): Backup {
  return {
    async exportBackup(write) {
      const records = await consumers.list();
      if (records.length > 0) await write(records.map((r) => consumerLine(r) + '\n').join(''));
      await keys.exportBackup(write);
    },
    async importBackup(lines) {
      const here = new Map((await consumers.list()).map((r) => [r.id, r]));
      const ofImport = new ConsumersOfImport(here, check);
      let written: ConsumerRecord[] = [];
      const writeConsumers = async () => {
        written = ofImport.changed();
        await consumers.putAll(written);
      };
      try {
        const result = await keys.importBackup(keyLinesOf(lines, ofImport, writeConsumers));
        return {
          imported: result.imported + written.length,
          unchanged: result.unchanged + ofImport.inFile.size - written.length,
          ids: [...written.map((r) => r.id), ...result.ids],
        };
      } catch (err) {
        await restore(consumers, written, here);
        throw err;
      }
    },
  };
}

async function restore(
  consumers: ConsumerStore,
  changed: readonly ConsumerRecord[],
  before: ReadonlyMap<string, ConsumerRecord>,
): Promise<void> {
  const previous = changed.flatMap((r) => (before.has(r.id) ? [before.get(r.id)!] : []));
  await consumers.putAll(previous);
  for (const record of changed) if (!before.has(record.id)) await consumers.delete(record.id);
}
