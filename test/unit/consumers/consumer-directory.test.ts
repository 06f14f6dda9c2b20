import { ConsumerDirectory } from '../../../src/consumers/consumer-directory';
import { consumerRecord, MemoryConsumerStore } from './consumer-kit';

/**
 * The directory of consumers each process holds (src/consumers/consumer-directory.ts): read whole at
 * start, kept by the store's change messages (one read of the one consumer), read whole again on a
 * resync and every refresh period, and what a store that does not answer leaves it holding.
 */

const REFRESH_MS = 30_000;

function setUp(records = [consumerRecord(), consumerRecord()]) {
  const store = new MemoryConsumerStore(records);
  const errors: string[] = [];
  const directory = new ConsumerDirectory(store, (err) => errors.push((err as Error).message), REFRESH_MS);
  toClose.push(directory);
  return { store, directory, errors, records };
}

let toClose: ConsumerDirectory[] = [];
afterEach(() => {
  for (const directory of toClose) directory.close();
  toClose = [];
  jest.useRealTimers();
});

/** Runs the promises a message started. */
const settled = () => new Promise((resolve) => setImmediate(resolve));

test('start reads every consumer once; asking the directory asks the store nothing', async () => {
  const { store, directory, records } = setUp();
  await directory.start();
  expect(store.calls).toEqual(['list']);
  expect(directory.get(records[0]!.id)).toEqual(records[0]);
  expect(directory.get('con_' + 'f'.repeat(24))).toBeUndefined();
  expect(directory.all().map((r) => r.id)).toEqual(records.map((r) => r.id));
  expect(store.calls).toEqual(['list']);
});

test('a change message reads that consumer alone: a change is seen, a delete removes it, a new one appears', async () => {
  const { store, directory, records } = setUp();
  await directory.start();
  store.calls.length = 0;
  const [first, second] = records as [ReturnType<typeof consumerRecord>, ReturnType<typeof consumerRecord>];
  await store.put({ ...first, name: 'renamed', limits: { perDay: 9 } });
  await store.delete(second.id);
  const added = consumerRecord();
  await store.put(added);
  await settled();
  expect(directory.get(first.id)).toMatchObject({ name: 'renamed', limits: { perDay: 9 } });
  expect(directory.get(second.id)).toBeUndefined();
  expect(directory.get(added.id)).toEqual(added);
  expect(store.calls.filter((c) => c.startsWith('get') || c === 'list')).toEqual([
    `get ${first.id}`,
    `get ${second.id}`,
    `get ${added.id}`,
  ]);
});

test('a resync reads everything again: what changed while messages were lost is seen', async () => {
  const { store, directory, records } = setUp();
  await directory.start();
  store.announce = false;
  await store.delete(records[0]!.id);
  const added = consumerRecord();
  await store.put(added);
  await settled();
  expect(directory.get(records[0]!.id)).toBeDefined();
  store.resync();
  await settled();
  expect(directory.all().map((r) => r.id)).toEqual([records[1]!.id, added.id]);
});

test('without a message or a resync, the refresh period reads everything again', async () => {
  jest.useFakeTimers();
  const { store, directory, records } = setUp();
  await directory.start();
  store.announce = false;
  await store.put({ ...records[0]!, name: 'changed quietly' });
  await jest.advanceTimersByTimeAsync(REFRESH_MS - 1);
  expect(directory.get(records[0]!.id)!.name).toBe(records[0]!.name);
  await jest.advanceTimersByTimeAsync(1);
  expect(directory.get(records[0]!.id)!.name).toBe('changed quietly');
});

test('a store that does not answer: reported, and the directory keeps what it held', async () => {
  jest.useFakeTimers();
  const { store, directory, records, errors } = setUp();
  await directory.start();
  store.refuse.get = [new Error('Command timed out')];
  store.refuse.list = [new Error('Connection is closed.'), new Error('Connection is closed.')];
  store.changed(records[0]!.id);
  store.resync();
  await jest.advanceTimersByTimeAsync(REFRESH_MS);
  expect(errors).toEqual(['Command timed out', 'Connection is closed.', 'Connection is closed.']);
  expect(directory.all()).toEqual(records);
});

test('close stops following: no listener left, no refresh after', async () => {
  jest.useFakeTimers();
  const { store, directory } = setUp();
  await directory.start();
  expect(store.listeners()).toBe(2);
  directory.close();
  expect(store.listeners()).toBe(0);
  store.calls.length = 0;
  await jest.advanceTimersByTimeAsync(3 * REFRESH_MS);
  expect(store.calls).toEqual([]);
});
