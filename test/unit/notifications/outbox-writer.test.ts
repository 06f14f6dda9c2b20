import { ManualClock } from '../../../src/shared/clock';
import type { WebhookEventType } from '../../../src/shared/config';
import { OutboxWriter } from '../../../src/notifications/outbox-writer';
import { gate, MemoryOutbox, outboxEvent } from './notifications-kit';

/**
 * The outbox writer (src/notifications/outbox-writer.ts): the request path only appends; what
 * gathered goes in one batch on the next turn; a refused batch is kept (bounded) and written again
 * a second later. Jest's fake timers stand in for the event loop's turns and the retry's second.
 */

const T0 = Date.UTC(2026, 2, 10, 12);

function setUp(maxEvents = 100) {
  const outbox = new MemoryOutbox();
  const clock = new ManualClock(T0);
  const dropped: WebhookEventType[][] = [];
  const errors: string[] = [];
  let written = 0;
  const bound = { maxEvents };
  const writer = new OutboxWriter({
    outbox,
    clock,
    maxEvents: () => bound.maxEvents,
    onDropped: (types) => dropped.push([...types]),
    onWritten: () => (written += 1),
    onError: (err) => errors.push((err as Error).message),
  });
  const event = (id: string) => outboxEvent(id, ['ep-a'], T0);
  /** The ids of each batch the outbox was given. */
  const batches = () => outbox.callsOf('add').map((args) => args[0]);
  return { outbox, clock, writer, dropped, errors, written: () => written, bound, event, batches };
}

beforeEach(() => jest.useFakeTimers({ now: T0 }));
afterEach(() => jest.useRealTimers());

/** Runs the next turn of the event loop (immediates) and the promises it starts. */
const nextTurn = () => jest.advanceTimersByTimeAsync(0);

test('push writes nothing at once; the events pushed in one turn go in one batch, in order, on the next; onWritten once', async () => {
  const w = setUp();
  w.writer.push(w.event('msg_1'));
  w.writer.push(w.event('msg_2'));
  w.writer.push(w.event('msg_3'));
  expect(w.outbox.calls).toEqual([]);
  await nextTurn();
  expect(w.batches()).toEqual([['msg_1', 'msg_2', 'msg_3']]);
  expect(w.outbox.callsOf('add')[0]!.slice(1)).toEqual([T0, 100]);
  expect(w.written()).toBe(1);
  expect(w.outbox.rows.map((r) => r.eventId)).toEqual(['msg_1', 'msg_2', 'msg_3']);
  // Nothing pending: a later turn writes nothing more.
  await jest.advanceTimersByTimeAsync(5_000);
  expect(w.batches()).toHaveLength(1);
});

test('past the bound within one turn the oldest are dropped here and counted; the newest are written', async () => {
  const w = setUp(3);
  for (let i = 1; i <= 5; i += 1) w.writer.push(w.event(`msg_${i}`));
  expect(w.dropped.flat()).toEqual(['quota.threshold', 'quota.threshold']);
  await nextTurn();
  expect(w.batches()).toEqual([['msg_3', 'msg_4', 'msg_5']]);
  expect(w.outbox.callsOf('add')[0]![2]).toBe(3);
});

test('what the outbox drops past its own bound is counted too', async () => {
  const w = setUp();
  w.outbox.dropOnNextAdd = ['key.banned', 'key.expiring'];
  w.writer.push(w.event('msg_1'));
  await nextTurn();
  expect(w.dropped).toEqual([['key.banned', 'key.expiring']]);
});

test('a refused batch is kept and written again a second later (not before), ahead of what was pushed since, once', async () => {
  const w = setUp();
  w.outbox.refuse.add = [new Error('Connection is closed.')];
  w.writer.push(w.event('msg_1'));
  await nextTurn();
  expect(w.errors).toEqual(['Connection is closed.']);
  expect(w.written()).toBe(0);
  w.writer.push(w.event('msg_2'));
  await jest.advanceTimersByTimeAsync(999);
  expect(w.batches()).toEqual([['msg_1']]);
  await jest.advanceTimersByTimeAsync(1);
  expect(w.batches()).toEqual([['msg_1'], ['msg_1', 'msg_2']]);
  expect(w.written()).toBe(1);
  expect(w.outbox.rows.map((r) => r.eventId)).toEqual(['msg_1', 'msg_2']);
  await jest.advanceTimersByTimeAsync(10_000);
  expect(w.batches()).toHaveLength(2);
});

test('events pushed while a write is refused wait with it: the next write a second later, the refused batch first, within the bound', async () => {
  const w = setUp(3);
  const held = gate();
  w.outbox.addGate = held.wait;
  w.outbox.refuse.add = [new Error('Command timed out')];
  w.writer.push(w.event('msg_1'));
  w.writer.push(w.event('msg_2'));
  await nextTurn();
  // During the write (which will be refused): two more, within the bound on their own.
  w.writer.push(w.event('msg_3'));
  w.writer.push(w.event('msg_4'));
  expect(w.dropped).toEqual([]);
  // Their turn comes while the write is still out.
  await nextTurn();
  w.outbox.addGate = null;
  held.open();
  await nextTurn();
  // Kept with the refused batch: four for a bound of three, the oldest dropped and counted.
  expect(w.dropped.flat()).toEqual(['quota.threshold']);
  // The outbox just refused: nothing is written again before the second is out.
  await jest.advanceTimersByTimeAsync(999);
  expect(w.batches()).toEqual([['msg_1', 'msg_2']]);
  await jest.advanceTimersByTimeAsync(1);
  expect(w.batches()).toEqual([
    ['msg_1', 'msg_2'],
    ['msg_2', 'msg_3', 'msg_4'],
  ]);
});

test('a bound lowered by a reload while the outbox refuses cuts what is kept at the next push', async () => {
  const w = setUp(3);
  w.outbox.refuse.add = [new Error('Command timed out')];
  w.writer.push(w.event('msg_1'));
  w.writer.push(w.event('msg_2'));
  await nextTurn();
  w.bound.maxEvents = 2;
  w.writer.push(w.event('msg_3'));
  expect(w.dropped.flat()).toHaveLength(1);
  await jest.advanceTimersByTimeAsync(1_000);
  expect(w.batches()[1]).toEqual(['msg_2', 'msg_3']);
  expect(w.outbox.callsOf('add')[1]![2]).toBe(2);
  expect(w.outbox.rows.map((r) => r.eventId)).toEqual(['msg_2', 'msg_3']);
});

test('writes run one after another: what is pushed during a slow write goes in the next batch, after it', async () => {
  const w = setUp();
  const held = gate();
  w.outbox.addGate = held.wait;
  w.writer.push(w.event('msg_1'));
  await nextTurn();
  w.writer.push(w.event('msg_2'));
  await nextTurn();
  // The first write has not answered: the second has not started.
  expect(w.batches()).toEqual([['msg_1']]);
  w.outbox.addGate = null;
  held.open();
  await nextTurn();
  expect(w.batches()).toEqual([['msg_1'], ['msg_2']]);
});

test('close writes what is pending at once', async () => {
  const w = setUp();
  w.writer.push(w.event('msg_1'));
  await w.writer.close();
  expect(w.batches()).toEqual([['msg_1']]);
  // The turn planned by the push finds nothing left.
  await nextTurn();
  expect(w.batches()).toHaveLength(1);
});

test('close while a retry is planned writes what is kept at once, and plans nothing after', async () => {
  const w = setUp();
  w.outbox.refuse.add = [new Error('Connection is closed.')];
  w.writer.push(w.event('msg_1'));
  await nextTurn();
  w.writer.push(w.event('msg_2'));
  await w.writer.close();
  expect(w.batches()).toEqual([['msg_1'], ['msg_1', 'msg_2']]);
  expect(jest.getTimerCount()).toBe(0);
});
