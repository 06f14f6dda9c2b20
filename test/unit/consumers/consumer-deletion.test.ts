import { SqliteKeyStore } from '../../../src/keys/stores/sqlite-key-store';
import { ConsumerClosed, type ApiKeyRecord } from '../../../src/keys/types';
import {
  AFTER_DELETION_HOLD_MS,
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
