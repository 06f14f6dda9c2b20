import { consumerLine, withConsumersInBackup, type Backup } from '../../../src/consumers/consumer-backup';
import { decodeConsumer } from '../../../src/consumers/consumer-record';
import type { ImportResult } from '../../../src/keys/types';
import { consumerRecord, MemoryConsumerStore } from './consumer-kit';

/**
 * Consumers in the key backup (src/consumers/consumer-backup.ts): the export's consumer lines first,
 * an import taking them in any place, every key's consumer checked once the file is read, and the
 * import whole or not at all. The key service is a fake that reads its lines and answers, or refuses.
 */

/** A key service's backup that keeps the lines it was handed, answers one import per key line, or refuses. */
function keyBackup(refuse: Error | null = null) {
  const handed: string[] = [];
  const backup: Backup = {
    async exportBackup(write) {
      await write('{"v":1,"id":"key_a"}\n');
    },
    async importBackup(lines): Promise<ImportResult> {
      for await (const line of lines) handed.push(line);
      if (refuse) throw refuse;
      const keys = handed.filter((l) => l.trim() !== '');
      return { imported: keys.length, unchanged: 0, ids: keys.map((l) => (JSON.parse(l) as { id: string }).id) };
    },
  };
  return { backup, handed };
}

const check = (fields: Record<string, unknown>) => decodeConsumer(fields);
const keyLine = (id: string, consumerId?: string, revokedAt: string | null = null) =>
  JSON.stringify({ v: 1, id, ...(consumerId ? { consumerId } : {}), revokedAt });

async function* linesOf(lines: string[]): AsyncGenerator<string> {
  for (const line of lines) yield line;
}

test('the export writes the consumer lines first, then the keys', async () => {
  const records = [consumerRecord(), consumerRecord()];
  const out: string[] = [];
  await withConsumersInBackup(keyBackup().backup, new MemoryConsumerStore(records), check).exportBackup(
    async (text) => void out.push(text),
  );
  expect(out.join('').split('\n').filter(Boolean)).toEqual([...records.map(consumerLine), '{"v":1,"id":"key_a"}']);
  expect(JSON.parse(consumerLine(records[0]!))).toMatchObject({ v: 1, kind: 'consumer', id: records[0]!.id });
});

test('an import: consumer lines anywhere, blanked for the key service (line numbers kept); new or changed ones written before the keys; counts added', async () => {
  const same = consumerRecord();
  const changed = consumerRecord({ name: 'before' });
  const store = new MemoryConsumerStore([same, changed]);
  const fresh = consumerRecord();
  const { backup, handed } = keyBackup();
  const result = await withConsumersInBackup(backup, store, check).importBackup(
    linesOf([
      keyLine('key_1', fresh.id),
      consumerLine(same),
      consumerLine({ ...changed, name: 'after' }),
      consumerLine(fresh),
    ]),
  );
  expect(handed).toEqual([keyLine('key_1', fresh.id), '', '', '']);
  expect(store.calls.filter((c) => c.startsWith('putAll'))).toEqual([`putAll ${changed.id},${fresh.id}`]);
  expect(store.byId.get(changed.id)!.name).toBe('after');
  expect(result).toEqual({ imported: 3, unchanged: 1, ids: [changed.id, fresh.id, 'key_1'] });
});

test('a key naming a consumer neither here nor in the file is refused by its line, after the whole file, nothing written', async () => {
  const store = new MemoryConsumerStore();
  const missing = 'con_' + 'e'.repeat(24);
  const { backup } = keyBackup();
  await expect(
    withConsumersInBackup(backup, store, check).importBackup(
      linesOf([consumerLine(consumerRecord()), keyLine('key_1', missing), keyLine('key_2', missing)]),
    ),
  ).rejects.toThrow(`line 2: consumerId ${missing} is neither a consumer here nor one in the file`);
  expect(store.byId.size).toBe(0);
});

test('a revoked key may name a consumer that is gone (deleted once its keys were revoked)', async () => {
  const { backup } = keyBackup();
  const result = await withConsumersInBackup(backup, new MemoryConsumerStore(), check).importBackup(
    linesOf([keyLine('key_1', 'con_' + 'e'.repeat(24), '2026-03-01T00:00:00.000Z')]),
  );
  expect(result.ids).toEqual(['key_1']);
});

test('a bad consumer line is refused naming its line: the check, the format version, a repeat', async () => {
  const record = consumerRecord();
  const { backup } = keyBackup();
  const run = (lines: string[]) =>
    withConsumersInBackup(backup, new MemoryConsumerStore(), check).importBackup(linesOf(lines));
  await expect(run(['', JSON.stringify({ ...JSON.parse(consumerLine(record)), billingDay: 40 })])).rejects.toThrow(
    'line 2: consumer: corrupt consumer record: billingDay',
  );
  await expect(run([JSON.stringify({ ...JSON.parse(consumerLine(record)), v: 2 })])).rejects.toThrow(
    'line 1: consumer: unknown format version 2',
  );
  await expect(run([consumerLine(record), consumerLine(record)])).rejects.toThrow(
    `line 2: consumer ${record.id} appears twice`,
  );
});

test('keys refused after the consumers were written: the consumers are put back as they were, the new ones removed', async () => {
  const kept = consumerRecord({ name: 'before' });
  const store = new MemoryConsumerStore([kept]);
  const fresh = consumerRecord();
  const { backup } = keyBackup(new Error('line 3: secret held by another key'));
  await expect(
    withConsumersInBackup(backup, store, check).importBackup(
      linesOf([consumerLine({ ...kept, name: 'after' }), consumerLine(fresh), keyLine('key_1', fresh.id)]),
    ),
  ).rejects.toThrow('secret held by another key');
  expect([...store.byId.values()]).toEqual([kept]);
});
