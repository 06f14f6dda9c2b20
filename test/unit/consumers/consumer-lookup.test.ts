import { ConsumerDirectory } from '../../../src/consumers/consumer-directory';
import { consumerLookup, consumerShareOf } from '../../../src/consumers/consumer-lookup';
import { consumerRecord, MemoryConsumerStore } from './consumer-kit';

/**
 * What the request path learns of a key's consumer (src/consumers/consumer-lookup.ts): its shared
 * windows when it has limits, its name, from the directory held in process, built once per record.
 */

test('a consumer without a window shares nothing; with one, its id, limits and billing day', () => {
  expect(consumerShareOf(consumerRecord())).toBeUndefined();
  // Hiding windows is not a limit.
  expect(consumerShareOf(consumerRecord({ limits: { hiddenWindows: ['day'] } }))).toBeUndefined();
  for (const limits of [{ perMinute: 1 }, { perDay: 1 }, { perMonth: 1 }]) {
    const record = consumerRecord({ limits, billingDay: 12 });
    expect(consumerShareOf(record)).toEqual({ id: record.id, limits, billingDay: 12 });
  }
});

describe('consumerLookup', () => {
  const limited = consumerRecord({ name: 'Acme', limits: { perDay: 100 }, billingDay: 5 });
  const unlimited = consumerRecord({ name: 'Free' });
  let store: MemoryConsumerStore;
  let directory: ConsumerDirectory;

  beforeEach(async () => {
    store = new MemoryConsumerStore([limited, unlimited]);
    directory = new ConsumerDirectory(store);
    await directory.start();
  });
  afterEach(() => directory.close());

  test('a key without a consumer, or whose consumer is unknown here, has none', () => {
    const lookup = consumerLookup(directory);
    for (const key of [{}, { consumerId: 'con_' + 'f'.repeat(24) }]) {
      expect(lookup.shareOf(key)).toBeUndefined();
      expect(lookup.consumerOf(key)).toBeUndefined();
    }
  });

  test("a key's consumer: its name, and its share when it has limits", () => {
    const lookup = consumerLookup(directory);
    expect(lookup.consumerOf({ consumerId: limited.id })).toEqual({
      id: limited.id,
      name: 'Acme',
      share: { id: limited.id, limits: { perDay: 100 }, billingDay: 5 },
    });
    expect(lookup.consumerOf({ consumerId: unlimited.id })).toEqual({ id: unlimited.id, name: 'Free' });
    expect(lookup.shareOf({ consumerId: unlimited.id })).toBeUndefined();
  });

  test('the share is built once per record (the same object for every request), and again once the record changes', async () => {
    const lookup = consumerLookup(directory);
    const first = lookup.shareOf({ consumerId: limited.id });
    expect(lookup.shareOf({ consumerId: limited.id })).toBe(first);
    expect(lookup.consumerOf({ consumerId: limited.id })!.share).toBe(first);
    await store.put({ ...limited, limits: { perDay: 50 } });
    await new Promise((resolve) => setImmediate(resolve));
    expect(lookup.shareOf({ consumerId: limited.id })).toEqual({
      id: limited.id,
      limits: { perDay: 50 },
      billingDay: 5,
    });
    // Limits removed: nothing shared any more.
    await store.put({ ...limited, limits: {} });
    await new Promise((resolve) => setImmediate(resolve));
    expect(lookup.shareOf({ consumerId: limited.id })).toBeUndefined();
    expect(lookup.consumerOf({ consumerId: limited.id })).toEqual({ id: limited.id, name: 'Acme' });
  });
});
