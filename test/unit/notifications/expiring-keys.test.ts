import { ManualClock } from '../../../src/shared/clock';
import { eventId, type WebhookEvent } from '../../../src/notifications/events';
import { EXPIRY_NOTICE_MS, ExpiringKeysWatch, type ExpiringKeySource } from '../../../src/notifications/expiring-keys';
import { eventually } from '../../support/eventually';
import { logLinesWith } from '../../support/log-lines';
import { capturedLogger, gate } from './notifications-kit';

/**
 * `key.expiring` (src/notifications/expiring-keys.ts): a notice 7 days before a key's expiry, from
 * the live keys held in memory (read whole hourly, kept by the store's change notices). The key
 * store is a fake of the three reads the watch makes.
 */

const T0 = Date.UTC(2026, 2, 10, 12);
const DAY = 86_400_000;

interface Key {
  id: string;
  expiresAt: string | null;
  revokedAt: string | null;
  consumerId?: string | null;
}

class Keys implements ExpiringKeySource {
  readonly byId = new Map<string, Key>();
  lists = 0;
  /** A list reads the keys as they are, then waits for this before answering. */
  listGate: Promise<void> | null = null;
  listRefusals: Error[] = [];
  private readonly listeners = new Set<(change: { id: string }) => void>();

  put(key: Key): void {
    this.byId.set(key.id, key);
  }

  /** Another instance's write: the record, then its change notice. */
  change(key: Key): void {
    this.put(key);
    for (const listener of this.listeners) listener({ id: key.id });
  }

  async list(): Promise<Key[]> {
    this.lists += 1;
    const err = this.listRefusals.shift();
    if (err) throw err;
    const snapshot = [...this.byId.values()].map((k) => ({ ...k }));
    if (this.listGate) await this.listGate;
    return snapshot;
  }

  async get(id: string): Promise<Key | null> {
    return this.byId.get(id) ?? null;
  }

  onChange(listener: (change: { id: string }) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
}

const iso = (ms: number) => new Date(ms).toISOString();

function setUp() {
  const keys = new Keys();
  const clock = new ManualClock(T0);
  const { logger, lines } = capturedLogger();
  const events: WebhookEvent[] = [];
  const wanted = { now: true };
  const watch = new ExpiringKeysWatch({ keys, clock, logger, wanted: () => wanted.now, emit: (e) => events.push(e) });
  watches.push(watch);
  const noticed = () => events.map((e) => (JSON.parse(e.body) as { data: { keyId: string } }).data.keyId);
  return { keys, clock, lines, events, wanted, watch, noticed };
}

let watches: ExpiringKeysWatch[] = [];
afterEach(() => {
  for (const watch of watches) watch.close();
  watches = [];
});

/** Every promise callback queued so far has run. */
const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

test('a live key 7 days from its expiry gets one notice, named by key and expiry; keys further out, expired or revoked get none', async () => {
  const w = setUp();
  const expiresAt = T0 + 7 * DAY;
  w.keys.put({ id: 'key_due', expiresAt: iso(expiresAt), revokedAt: null, consumerId: 'con_1' });
  w.keys.put({ id: 'key_later', expiresAt: iso(T0 + 7 * DAY + 60_000), revokedAt: null });
  w.keys.put({ id: 'key_gone', expiresAt: iso(T0 - 1), revokedAt: null });
  w.keys.put({ id: 'key_revoked', expiresAt: iso(T0 + DAY), revokedAt: iso(T0 - DAY) });
  w.keys.put({ id: 'key_forever', expiresAt: null, revokedAt: null });
  await w.watch.check();
  expect(w.events.map((e) => [e.id, e.type, e.seenUntil])).toEqual([
    [eventId('key.expiring', 'key_due', expiresAt), 'key.expiring', expiresAt + DAY],
  ]);
  expect(JSON.parse(w.events[0]!.body)).toMatchObject({
    data: { keyId: 'key_due', consumerId: 'con_1', expiresAt: iso(expiresAt) },
  });
  // Once per instance; the other key's notice comes when it is due.
  await w.watch.check();
  expect(w.noticed()).toEqual(['key_due']);
  w.clock.advance(60_000);
  await w.watch.check();
  expect(w.noticed()).toEqual(['key_due', 'key_later']);
});

test('no receiver takes key.expiring: nothing is read or emitted; once one does, what is due goes', async () => {
  const w = setUp();
  w.keys.put({ id: 'key_due', expiresAt: iso(T0 + DAY), revokedAt: null });
  w.wanted.now = false;
  await w.watch.check();
  expect([w.keys.lists, w.events.length]).toEqual([0, 0]);
  w.wanted.now = true;
  await w.watch.check();
  expect(w.noticed()).toEqual(['key_due']);
});

test('the whole list is read again hourly, not at every check; changes come in between by notice', async () => {
  const w = setUp();
  w.watch.start();
  await nextTurn();
  expect(w.keys.lists).toBe(1);
  // A key created elsewhere with an expiry 3 days out: its notice at once, without a list.
  w.keys.change({ id: 'key_new', expiresAt: iso(T0 + 3 * DAY), revokedAt: null });
  await nextTurn();
  expect([w.noticed(), w.keys.lists]).toEqual([['key_new'], 1]);
  w.clock.advance(3_600_000 - 1);
  await w.watch.check();
  expect(w.keys.lists).toBe(1);
  w.clock.advance(1);
  await w.watch.check();
  expect(w.keys.lists).toBe(2);
});

test('an expiry moved by a change gets its own notice; a key revoked before its notice gets none', async () => {
  const w = setUp();
  w.watch.start();
  w.keys.change({ id: 'key_a', expiresAt: iso(T0 + 2 * DAY), revokedAt: null });
  await nextTurn();
  w.keys.change({ id: 'key_a', expiresAt: iso(T0 + 5 * DAY), revokedAt: null });
  w.keys.change({ id: 'key_b', expiresAt: iso(T0 + 30 * DAY), revokedAt: null });
  await nextTurn();
  w.keys.change({ id: 'key_b', expiresAt: iso(T0 + 30 * DAY), revokedAt: iso(T0) });
  w.clock.advance(30 * DAY - EXPIRY_NOTICE_MS);
  await w.watch.check();
  expect(w.events.map((e) => e.id)).toEqual([
    eventId('key.expiring', 'key_a', T0 + 2 * DAY),
    eventId('key.expiring', 'key_a', T0 + 5 * DAY),
  ]);
});

test('a list that fails is reported and read again at the next check', async () => {
  const w = setUp();
  w.keys.put({ id: 'key_due', expiresAt: iso(T0 + DAY), revokedAt: null });
  w.keys.listRefusals.push(new Error('Command timed out'));
  await w.watch.check();
  expect(w.events).toEqual([]);
  expect(logLinesWith(w.lines, { msg: 'could not read the keys for key.expiring; trying again' })).toHaveLength(1);
  await w.watch.check();
  expect(w.noticed()).toEqual(['key_due']);
});

test('a key revoked while the hourly list is being read gets no notice from the older list', async () => {
  const w = setUp();
  w.keys.put({ id: 'key_a', expiresAt: iso(T0 + 7 * DAY + 1_800_000), revokedAt: null });
  w.watch.start();
  await nextTurn();
  expect(w.keys.lists).toBe(1);
  // Its notice is not due yet (in half an hour). An hour later the list is read again, and answers late.
  w.clock.set(T0 + 3_600_000);
  const held = gate();
  w.keys.listGate = held.wait;
  const rescan = w.watch.check();
  await nextTurn();
  // Meanwhile the key is revoked; its change notice arrives before the list's answer.
  w.keys.change({ id: 'key_a', expiresAt: iso(T0 + 7 * DAY + 1_800_000), revokedAt: iso(T0 + 3_600_000) });
  await nextTurn();
  w.keys.listGate = null;
  held.open();
  await rescan;
  await nextTurn();
  await w.watch.check();
  expect(w.noticed()).toEqual([]);
});

test('a key whose expiry is set while the hourly list is being read gets its notice from its own read', async () => {
  const w = setUp();
  w.keys.put({ id: 'key_a', expiresAt: null, revokedAt: null });
  w.watch.start();
  await nextTurn();
  w.clock.set(T0 + 3_600_000);
  const held = gate();
  w.keys.listGate = held.wait;
  const rescan = w.watch.check();
  await nextTurn();
  w.keys.change({ id: 'key_a', expiresAt: iso(T0 + 2 * DAY), revokedAt: null });
  await nextTurn();
  w.keys.listGate = null;
  held.open();
  await rescan;
  await eventually(() => w.events.length > 0, { what: "key_a's notice" });
  expect(w.noticed()).toEqual(['key_a']);
});
