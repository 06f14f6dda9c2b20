import { EXPORT_FORMAT_VERSION, ImportLineError } from '../keys/key-export';
import type { ImportResult } from '../keys/types';
import { decodeConsumer, encodeConsumer, isConsumerId } from './consumer-record';
import type { ConsumerRecord, ConsumerStore } from './types';

/** What backup and restore need of the key service (admin/key-backup-routes.ts's KeyBackup). */
export interface Backup {
  exportLines(): Promise<string[]>;
  importBackup(body: string): Promise<ImportResult>;
}

/** A consumer's line in the backup: the record's fields, marked `kind: "consumer"`. */
export function consumerLine(record: ConsumerRecord): string {
  return JSON.stringify({ v: EXPORT_FORMAT_VERSION, kind: 'consumer', ...(JSON.parse(encodeConsumer(record)) as object) });
}

interface SplitBackup {
  consumers: ConsumerRecord[];
  /** The key lines, consumer lines blanked so that a key line keeps its line number. */
  keyBody: string;
  /** consumerId of each key line that names one, with its line number. */
  keyConsumers: Array<[string, number]>;
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

function splitBackup(body: string): SplitBackup {
  const lines = body.split('\n');
  const consumers: ConsumerRecord[] = [];
  const keyConsumers: Array<[string, number]> = [];
  const seen = new Set<string>();
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!.trim();
    if (line === '') continue;
    let fields: Record<string, unknown> | null = null;
    try {
      fields = JSON.parse(line) as Record<string, unknown>;
    } catch {
      continue; // the key parser names the bad line
    }
    if (fields?.kind !== 'consumer') {
      if (typeof fields?.consumerId === 'string') keyConsumers.push([fields.consumerId, i + 1]);
      continue;
    }
    const record = parseConsumerLine(line, i + 1);
    if (seen.has(record.id)) throw new ImportLineError(i + 1, `consumer ${record.id} appears twice`);
    seen.add(record.id);
    consumers.push(record);
    lines[i] = '';
  }
  return { consumers, keyBody: lines.join('\n'), keyConsumers };
}

/**
 * The key backup with consumers in it (CONTRACT §4: consumers are exported and imported like keys):
 * consumer lines first, then the keys. An import checks every line first (a key naming a consumer
 * neither here nor in the file refuses the import), writes the consumers, then the keys; should the
 * keys be refused (a secret held by another id), the consumers are put back as they were, so the
 * import applies whole or not at all.
 */
export function withConsumersInBackup(keys: Backup, consumers: ConsumerStore): Backup {
  return {
    async exportLines() {
      const records = await consumers.list();
      return [...records.map(consumerLine), ...(await keys.exportLines())];
    },
    async importBackup(body: string) {
      const split = splitBackup(body);
      const before = new Map((await consumers.list()).map((r) => [r.id, r]));
      const known = new Set([...before.keys(), ...split.consumers.map((r) => r.id)]);
      for (const [id, line] of split.keyConsumers) {
        if (!isConsumerId(id) || !known.has(id)) throw new ImportLineError(line, `consumerId ${id} is neither a consumer here nor one in the file`);
      }
      const changed = split.consumers.filter((r) => encodeConsumer(r) !== (before.has(r.id) ? encodeConsumer(before.get(r.id)!) : ''));
      await consumers.putAll(changed);
      try {
        const result = await keys.importBackup(split.keyBody);
        return { imported: result.imported + changed.length, unchanged: result.unchanged + split.consumers.length - changed.length };
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
