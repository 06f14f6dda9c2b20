import { SqliteKeyStore } from '../../../src/keys/stores/sqlite-key-store';
import { ConsumerClosed, type ApiKeyRecord } from '../../../src/keys/types';
import {
  AFTER_DELETION_HOLD_MS,
  DELETION_HOLD_MS,
  deleteUnusedConsumer,
  type ConsumerKeys,
} from '../../../src/consumers/consumer-deletion';
import { newRecord } from '../../integration/keys/key-store-contract';

/**
 * The steps of a consumer's delete (src/consumers/consumer-deletion.ts) on the in-process key store:
 * what each outcome leaves closed or open.
 */
const CONSUMER = 'con_' + 'e'.repeat(24);

describe('deleteUnusedConsumer', () => {
  let store: SqliteKeyStore;
  beforeEach(() => {
    store = new SqliteKeyStore({ dataDir: null });
  });
  afterEach(() => store.close());

  const tryInsert = (record: ApiKeyRecord) =>
    store.insert(record).then(
      () => 'inserted',
      (err: unknown) => (err instanceof ConsumerClosed ? 'closed' : String(err)),
    );

  it('deleted: the consumer stays closed to keys a while after, for a write that found it a moment before', async () => {
    const closes: number[] = [];
    const keys: ConsumerKeys = {
      list: () => store.list(),
      closeConsumer: (id, token, ms) => (closes.push(ms), store.closeConsumer(id, token, ms)),
      reopenConsumer: (id, token) => store.reopenConsumer(id, token),
    };
    expect(await deleteUnusedConsumer(CONSUMER, keys, async () => true)).toBe(true);
    expect(closes.at(-1)).toBe(AFTER_DELETION_HOLD_MS);
    expect(await tryInsert(newRecord({ consumerId: CONSUMER }).record)).toBe('closed');
  });

  it('a key written between the two reads: 409, nothing removed, the consumer open again', async () => {
    const late = newRecord({ consumerId: CONSUMER }).record;
    let reads = 0;
    const keys: ConsumerKeys = {
      list: async () => {
        // The write lands after the first read, before the close: the second read sees it.
        if (reads++ === 0) {
          const first = await store.list();
          await store.insert(late);
          return first;
        }
        return store.list();
      },
      closeConsumer: (id, token, ms) => store.closeConsumer(id, token, ms),
      reopenConsumer: (id, token) => store.reopenConsumer(id, token),
    };
    let removed = false;
    await expect(deleteUnusedConsumer(CONSUMER, keys, async () => (removed = true))).rejects.toMatchObject({
      code: 'conflict',
    });
    expect(removed).toBe(false);
    expect(await tryInsert(newRecord({ consumerId: CONSUMER }).record)).toBe('inserted');
  });

  it('a close that ran out during the read: 409, nothing removed', async () => {
    const keys: ConsumerKeys = {
      list: () => store.list(),
      // Every close finds no hold of this delete: the second one, as when the read outlasted the hold.
      closeConsumer: async () => false,
      reopenConsumer: (id, token) => store.reopenConsumer(id, token),
    };
    let removed = false;
    await expect(deleteUnusedConsumer(CONSUMER, keys, async () => (removed = true))).rejects.toMatchObject({
      code: 'conflict',
      message: expect.stringMatching(/longer than its hold/),
    });
    expect(removed).toBe(false);
  });

  it('the record was gone already: false, and this delete no longer holds the consumer closed', async () => {
    const keys: ConsumerKeys = {
      list: () => store.list(),
      closeConsumer: (id, token, ms) => store.closeConsumer(id, token, ms),
      reopenConsumer: (id, token) => store.reopenConsumer(id, token),
    };
    expect(await deleteUnusedConsumer(CONSUMER, keys, async () => false)).toBe(false);
    expect(await tryInsert(newRecord({ consumerId: CONSUMER }).record)).toBe('inserted');
  });
});

describe('deleteUnusedConsumer: the steps it takes', () => {
  /** A key store that records what the delete asks of it. */
  function recordingKeys(records: ApiKeyRecord[], closeAnswers: boolean[] = []) {
    const steps: string[] = [];
    const keys: ConsumerKeys = {
      list: async () => (steps.push('list'), records),
      closeConsumer: async (_id, _token, ms) => (steps.push(`close ${ms}`), closeAnswers.shift() ?? true),
      reopenConsumer: async () => void steps.push('reopen'),
    };
    return { keys, steps };
  }

  it('keys active at the first read: 409 with their count and at most five ids, nothing closed or removed', async () => {
    const active = Array.from({ length: 7 }, () => newRecord({ consumerId: CONSUMER }).record);
    const { keys, steps } = recordingKeys(active);
    let removed = false;
    const refused = deleteUnusedConsumer(CONSUMER, keys, async () => (removed = true));
    await expect(refused).rejects.toMatchObject({
      code: 'conflict',
      message: expect.stringContaining('7 active key(s)'),
    });
    const message = ((await refused.catch((err: unknown) => err)) as Error).message;
    expect(active.filter((k) => message.includes(k.id))).toHaveLength(5);
    expect(steps).toEqual(['list']);
    expect(removed).toBe(false);
  });

  it("revoked keys and other consumers' keys do not hold it: closed, read again, removed, held closed after", async () => {
    const revoked = newRecord({ consumerId: CONSUMER, revokedAt: '2026-03-01T00:00:00.000Z' }).record;
    const other = newRecord({ consumerId: 'con_' + 'd'.repeat(24) }).record;
    const { keys, steps } = recordingKeys([revoked, other]);
    expect(await deleteUnusedConsumer(CONSUMER, keys, async () => true)).toBe(true);
    expect(steps).toEqual([
      'list',
      `close ${DELETION_HOLD_MS}`,
      'list',
      `close ${DELETION_HOLD_MS}`,
      `close ${AFTER_DELETION_HOLD_MS}`,
    ]);
  });

  it('a key store that cannot close a consumer: removed after the one read', async () => {
    const steps: string[] = [];
    const keys: ConsumerKeys = { list: async () => (steps.push('list'), []) };
    expect(await deleteUnusedConsumer(CONSUMER, keys, async () => (steps.push('remove'), true))).toBe(true);
    expect(steps).toEqual(['list', 'remove']);
  });

  it('a removal that fails: the error is the answer, and the hold is left to run out (the delete may have happened)', async () => {
    const { keys, steps } = recordingKeys([]);
    await expect(
      deleteUnusedConsumer(CONSUMER, keys, async () => {
        throw new Error('Command timed out');
      }),
    ).rejects.toThrow('Command timed out');
    expect(steps).not.toContain('reopen');
  });

  it('a close that fails before the read: the consumer is opened again and nothing removed', async () => {
    const { keys, steps } = recordingKeys([]);
    keys.closeConsumer = async () => {
      steps.push('close');
      throw new Error('Connection is closed.');
    };
    let removed = false;
    await expect(deleteUnusedConsumer(CONSUMER, keys, async () => (removed = true))).rejects.toThrow(
      'Connection is closed.',
    );
    expect(steps).toEqual(['list', 'close', 'reopen']);
    expect(removed).toBe(false);
  });
});
