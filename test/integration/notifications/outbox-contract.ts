import type { Outbox, OutboxEvent } from '../../../src/notifications/outbox';

/**
 * What every outbox does (src/notifications/outbox.ts), run against Redis and SQLite alike:
 * events added once by id, one delivery per receiver, leases that keep a delivery with one claimer,
 * retries and releases, finishing, the bound, and dropping what goes to a receiver no instance names.
 */

const T0 = Date.UTC(2026, 2, 10, 12);
const LEASE = 30_000;

function event(
  id: string,
  endpoints: string[],
  createdAt = T0,
  type: OutboxEvent['type'] = 'quota.threshold',
): OutboxEvent {
  return { id, type, body: `{"id":"${id}"}`, createdAt, seenUntil: T0 + 86_400_000, endpoints };
}

export function describeOutbox(
  name: string,
  open: () => Promise<Outbox>,
  close: (outbox: Outbox) => Promise<void>,
): void {
  describe(`${name} outbox`, () => {
    let outbox: Outbox;
    beforeEach(async () => {
      outbox = await open();
    });
    afterEach(async () => {
      await close(outbox);
    });

    test('an event is due at once for each of its receivers, with its body; a second add of the same id adds nothing', async () => {
      expect(await outbox.add([event('msg_1', ['ep1', 'ep2'])], T0, 100)).toEqual([]);
      expect(await outbox.add([event('msg_1', ['ep1', 'ep2'])], T0 + 1, 100)).toEqual([]);
      expect(await outbox.size()).toBe(1);
      const [one] = await outbox.claim('ep1', 10, T0, T0 + LEASE);
      expect(one).toEqual({
        endpoint: 'ep1',
        eventId: 'msg_1',
        type: 'quota.threshold',
        body: '{"id":"msg_1"}',
        createdAt: T0,
        attempts: 0,
        leaseUntil: T0 + LEASE,
      });
      expect(await outbox.claim('ep1', 10, T0, T0 + LEASE)).toEqual([]);
      expect((await outbox.claim('ep2', 10, T0, T0 + LEASE)).map((d) => d.eventId)).toEqual(['msg_1']);
    });

    test('a claim holds the delivery until its lease ends; then another claimer gets it', async () => {
      await outbox.add([event('msg_1', ['ep1'])], T0, 100);
      const [first] = await outbox.claim('ep1', 10, T0, T0 + LEASE);
      expect(await outbox.claim('ep1', 10, T0 + LEASE - 1, T0 + 2 * LEASE)).toEqual([]);
      const [second] = await outbox.claim('ep1', 10, T0 + LEASE, T0 + 2 * LEASE);
      expect(second!.leaseUntil).toBe(T0 + 2 * LEASE);
      // The first claimer answers late: its finish touches nothing, the delivery stays the second's.
      await outbox.finish(first!);
      expect(await outbox.size()).toBe(1);
      await outbox.finish(second!);
      expect(await outbox.size()).toBe(0);
    });

    test('retry: due again later with one more attempt; release: due at once, no attempt counted', async () => {
      await outbox.add([event('msg_1', ['ep1'])], T0, 100);
      const [claimed] = await outbox.claim('ep1', 10, T0, T0 + LEASE);
      await outbox.retry(claimed!, T0 + 5000);
      expect(await outbox.claim('ep1', 10, T0 + 4999, T0 + LEASE)).toEqual([]);
      const [again] = await outbox.claim('ep1', 10, T0 + 5000, T0 + 5000 + LEASE);
      expect(again!.attempts).toBe(1);
      await outbox.release(again!, T0 + 6000);
      const [released] = await outbox.claim('ep1', 10, T0 + 6000, T0 + 6000 + LEASE);
      expect(released!.attempts).toBe(1);
    });

    test('an event leaves once every receiver has finished it; claims come oldest due first, up to the number asked', async () => {
      await outbox.add([event('msg_1', ['ep1', 'ep2']), event('msg_2', ['ep1'], T0 + 1)], T0, 100);
      const claimed = await outbox.claim('ep1', 1, T0, T0 + LEASE);
      expect(claimed.map((d) => d.eventId)).toHaveLength(1);
      const rest = await outbox.claim('ep1', 5, T0, T0 + LEASE);
      for (const d of [...claimed, ...rest]) await outbox.finish(d);
      expect(await outbox.size()).toBe(1);
      for (const d of await outbox.claim('ep2', 5, T0, T0 + LEASE)) await outbox.finish(d);
      expect(await outbox.size()).toBe(0);
      // Finished events are still recognised: adding one again (a retried enqueue) delivers nothing twice.
      await outbox.add([event('msg_1', ['ep1', 'ep2'])], T0 + 2, 100);
      expect(await outbox.size()).toBe(0);
    });

    test('past the bound the oldest events are dropped, their deliveries with them, and their types returned', async () => {
      await outbox.add([event('msg_1', ['ep1'], T0, 'key.banned'), event('msg_2', ['ep1'], T0 + 1)], T0, 3);
      expect(
        await outbox.add(
          [event('msg_3', ['ep1'], T0 + 2), event('msg_4', ['ep1'], T0 + 3), event('msg_5', ['ep1'], T0 + 4)],
          T0,
          3,
        ),
      ).toEqual(['key.banned', 'quota.threshold']);
      expect(await outbox.size()).toBe(3);
      expect((await outbox.claim('ep1', 10, T0, T0 + LEASE)).map((d) => d.eventId).sort()).toEqual([
        'msg_3',
        'msg_4',
        'msg_5',
      ]);
    });

    // Issue 48: a receiver removed from the config leaves nothing waiting for ever.
    test('a receiver no instance names loses its deliveries (one type each); an event stays for the receivers still named', async () => {
      await outbox.add([event('msg_1', ['ep1', 'ep2']), event('msg_2', ['ep2'], T0 + 1, 'key.banned')], T0, 100);
      expect((await outbox.keepReceivers('a', ['ep1'], T0, T0 + LEASE, 100)).sort()).toEqual([
        'key.banned',
        'quota.threshold',
      ]);
      expect(await outbox.size()).toBe(1);
      expect(await outbox.claim('ep2', 10, T0, T0 + LEASE)).toEqual([]);
      const [kept] = await outbox.claim('ep1', 10, T0, T0 + LEASE);
      expect(kept!.eventId).toBe('msg_1');
      await outbox.finish(kept!);
      expect(await outbox.size()).toBe(0);
      // Said again, nothing more is dropped; a receiver added later is delivered to as before.
      expect(await outbox.keepReceivers('a', ['ep1'], T0 + 1, T0 + LEASE, 100)).toEqual([]);
      await outbox.add([event('msg_3', ['ep2'])], T0 + 2, 100);
      expect(await outbox.keepReceivers('a', ['ep1', 'ep2'], T0 + 2, T0 + LEASE, 100)).toEqual([]);
      expect((await outbox.claim('ep2', 10, T0 + 2, T0 + LEASE)).map((d) => d.eventId)).toEqual(['msg_3']);
    });

    test('a receiver another instance still names is kept until that instance is forgotten, or its word lapses', async () => {
      await outbox.add([event('msg_1', ['ep1', 'ep2'])], T0, 100);
      await outbox.keepReceivers('old', ['ep1', 'ep2'], T0, T0 + LEASE, 100);
      expect(await outbox.keepReceivers('new', ['ep1'], T0, T0 + LEASE, 100)).toEqual([]);
      await outbox.forgetInstance('old');
      expect(await outbox.keepReceivers('new', ['ep1'], T0 + 1, T0 + LEASE, 100)).toEqual(['quota.threshold']);

      await outbox.add([event('msg_2', ['ep1', 'ep3'])], T0 + 2, 100);
      await outbox.keepReceivers('died', ['ep3'], T0 + 2, T0 + 1000, 100);
      expect(await outbox.keepReceivers('new', ['ep1'], T0 + 999, T0 + LEASE, 100)).toEqual([]);
      expect(await outbox.keepReceivers('new', ['ep1'], T0 + 1000, T0 + LEASE, 100)).toEqual(['quota.threshold']);
      expect(await outbox.size()).toBe(2);
    });

    test('at most maxDrops deliveries go per call; the next call takes the rest', async () => {
      await outbox.add(
        [event('msg_1', ['ep1', 'ep2']), event('msg_2', ['ep1'], T0 + 1), event('msg_3', ['ep1'], T0 + 2)],
        T0,
        100,
      );
      expect(await outbox.keepReceivers('a', ['ep2'], T0, T0 + LEASE, 2)).toHaveLength(2);
      expect(await outbox.size()).toBe(2);
      expect(await outbox.keepReceivers('a', ['ep2'], T0, T0 + LEASE, 2)).toHaveLength(1);
      expect(await outbox.keepReceivers('a', ['ep2'], T0, T0 + LEASE, 2)).toEqual([]);
      expect(await outbox.size()).toBe(1);
      expect((await outbox.claim('ep2', 10, T0, T0 + LEASE)).map((d) => d.eventId)).toEqual(['msg_1']);
    });

    test('an instance naming no receiver keeps none: every delivery is dropped, one under a claim too (its late finish then changes nothing)', async () => {
      await outbox.add([event('msg_1', ['ep1']), event('msg_2', ['ep1'], T0 + 1)], T0, 100);
      const [claimed] = await outbox.claim('ep1', 1, T0, T0 + LEASE);
      expect(await outbox.keepReceivers('a', [], T0, T0 + LEASE, 100)).toEqual(['quota.threshold', 'quota.threshold']);
      expect(await outbox.size()).toBe(0);
      await outbox.finish(claimed!);
      await outbox.retry(claimed!, T0 + 5000);
      expect(await outbox.size()).toBe(0);
      expect(await outbox.claim('ep1', 10, T0 + 5000, T0 + LEASE)).toEqual([]);
    });
  });
}
