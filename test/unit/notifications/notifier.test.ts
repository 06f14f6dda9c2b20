import { Registry } from 'prom-client';
import { ManualClock } from '../../../src/shared/clock';
import type { NotificationsConfig } from '../../../src/shared/config';
import { endpointKey } from '../../../src/notifications/endpoints';
import { eventId } from '../../../src/notifications/events';
import { Notifier } from '../../../src/notifications/notifier';
import type { ClaimedDelivery } from '../../../src/notifications/outbox';
import { eventually } from '../../support/eventually';
import { logLinesWith } from '../../support/log-lines';
import { capturedLogger, MemoryOutbox } from './notifications-kit';

/**
 * The notifier (src/notifications/notifier.ts) routes what the watches find to the receivers of the
 * config in force: each event to the receivers taking its type, none written when none does, a
 * reload seen without telling it, key.revoked once, drops counted. The outbox is held in memory and
 * claims nothing, so no delivery is attempted; delivery is dispatcher.test.ts's.
 */

const T0 = Date.UTC(2026, 2, 10, 12);
const SECRET = 'whsec_' + Buffer.alloc(32, 7).toString('base64');
const ALL = 'http://127.0.0.1:9/all';
const BANS = 'http://127.0.0.1:9/bans';

class QuietOutbox extends MemoryOutbox {
  override async claim(): Promise<ClaimedDelivery[]> {
    return [];
  }
}

function config(webhooks: NotificationsConfig['webhooks'], outboxMaxEvents = 1000): NotificationsConfig {
  return { webhooks, outboxMaxEvents, timeoutMs: 1000 };
}

function setUp(initial: NotificationsConfig) {
  const outbox = new QuietOutbox();
  const clock = new ManualClock(T0);
  const { logger, lines } = capturedLogger();
  const registry = new Registry();
  const inForce = { config: initial };
  const notifier = new Notifier({
    outbox,
    config: () => inForce.config,
    banDurationMs: 900_000,
    keys: { list: async () => [], get: async () => null, onChange: () => () => {} },
    clock,
    logger,
    registry,
  });
  notifiers.push(notifier);
  /** Each event written, with the receivers it goes to. */
  const written = () => outbox.rows.map((r) => [r.type, r.endpoint]);
  return { outbox, clock, lines, inForce, notifier, written };
}

let notifiers: Notifier[] = [];
afterEach(async () => {
  await Promise.all(notifiers.map((n) => n.close()));
  notifiers = [];
});

const revoked = (at: number) => ({ id: 'key_a', revokedAt: new Date(at).toISOString() });

test('an event goes to the receivers that take its type, and only to them', async () => {
  const n = setUp(
    config([
      { url: ALL, secret: SECRET },
      { url: BANS, secret: SECRET, events: ['key.banned'] },
    ]),
  );
  n.notifier.keyRevoked(revoked(T0), 'admin');
  await eventually(() => n.outbox.rows.length > 0, { what: 'the event written' });
  expect(n.written()).toEqual([['key.revoked', endpointKey(ALL)]]);
});

test('no receiver takes the type: nothing is written; a reload that adds one is followed without a word', async () => {
  const n = setUp(config([{ url: BANS, secret: SECRET, events: ['key.banned'] }]));
  n.notifier.keyRevoked(revoked(T0), 'admin');
  await new Promise((resolve) => setImmediate(resolve));
  expect(n.outbox.callsOf('add')).toEqual([]);
  n.inForce.config = config([{ url: BANS, secret: SECRET, events: ['key.banned', 'key.revoked'] }]);
  n.notifier.keyRevoked(revoked(T0), 'admin');
  await eventually(() => n.outbox.rows.length > 0, { what: 'the event written after the reload' });
  expect(n.written()).toEqual([['key.revoked', endpointKey(BANS)]]);
});

test('key.revoked: named by key and instant, so a repeat is the same event; a repeat more than a day later, or no revocation, sends nothing', async () => {
  const n = setUp(config([{ url: ALL, secret: SECRET }]));
  n.notifier.keyRevoked(revoked(T0), 'admin');
  n.notifier.keyRevoked(revoked(T0), 'holder');
  n.notifier.keyRevoked({ id: 'key_b', revokedAt: null }, 'admin');
  n.notifier.keyRevoked({ id: 'key_c', revokedAt: new Date(T0 - 86_400_000 - 1).toISOString() }, 'admin');
  await eventually(() => n.outbox.callsOf('add').length > 0, { what: 'the batch written' });
  expect(n.outbox.callsOf('add')[0]![0]).toEqual([
    eventId('key.revoked', 'key_a', T0),
    eventId('key.revoked', 'key_a', T0),
  ]);
  expect(n.outbox.rows).toHaveLength(1);
});

test('events dropped past the bound are counted per type and logged', async () => {
  const n = setUp(config([{ url: ALL, secret: SECRET }]));
  n.outbox.dropOnNextAdd = ['key.revoked', 'quota.threshold'];
  n.notifier.keyRevoked(revoked(T0), 'admin');
  await eventually(() => n.outbox.callsOf('add').length > 0, { what: 'the batch written' });
  const dropped = (await n.notifier.metrics.deliveries.get()).values.filter((v) => v.labels.result === 'dropped');
  expect(Object.fromEntries(dropped.map((v) => [v.labels.event, v.value]))).toEqual({
    'quota.threshold': 1,
    'key.banned': 0,
    'key.expiring': 0,
    'key.revoked': 1,
  });
  expect(
    logLinesWith(n.lines, { msg: 'webhook outbox full: oldest events dropped (notifications.outboxMaxEvents)' }),
  ).toMatchObject([{ events: 2 }]);
});
