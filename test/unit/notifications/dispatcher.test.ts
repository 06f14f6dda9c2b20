import { Registry } from 'prom-client';
import { ManualClock } from '../../../src/shared/clock';
import { ATTEMPTS_PER_ENDPOINT, WebhookDispatcher } from '../../../src/notifications/dispatcher';
import type { Endpoint } from '../../../src/notifications/endpoints';
import { createNotificationMetrics } from '../../../src/notifications/notification-metrics';
import { webhookSignature } from '../../../src/notifications/signature';
import { eventually } from '../../support/eventually';
import { logLinesWith } from '../../support/log-lines';
import { capturedLogger, gate, MemoryOutbox, outboxEvent, ScriptedSender } from './notifications-kit';

/**
 * The dispatcher's logic (src/notifications/dispatcher.ts) over an outbox held in memory and a
 * sender the test answers: what each outcome does to the delivery, the backoff, the bound per
 * receiver, receivers leaving the config, an outbox that does not answer, and the shutdown. The
 * real outboxes and real receivers: test/integration/notifications/.
 */

const T0 = Date.UTC(2026, 2, 10, 12);
const TIMEOUT_MS = 2_000;
/** The timer never ticks in a test: every poll here comes from start() or wake(). */
const NO_TIMER = 3_600_000;

function endpoint(name: string): Endpoint {
  return {
    key: `ep-${name}`,
    url: `http://127.0.0.1:9/${name}`,
    shownUrl: `http://127.0.0.1:9/`,
    secret: Buffer.from(`secret of ${name}`),
    events: new Set(['quota.threshold']),
  };
}

const A = endpoint('a');
const B = endpoint('b');

function setUp(options: { sender?: ScriptedSender; endpoints?: () => readonly Endpoint[] } = {}) {
  const outbox = new MemoryOutbox();
  const sender = options.sender ?? new ScriptedSender();
  const clock = new ManualClock(T0);
  const { logger, lines } = capturedLogger();
  const metrics = createNotificationMetrics(new Registry(), () => outbox.size());
  const dispatcher = new WebhookDispatcher({
    outbox,
    sender,
    clock,
    logger,
    metrics,
    endpoints: options.endpoints ?? (() => [A]),
    timeoutMs: () => TIMEOUT_MS,
    random: () => 0.5,
    pollIntervalMs: NO_TIMER,
  });
  const count = async (result: string) =>
    (await metrics.deliveries.get()).values
      .filter((v) => v.labels.result === result)
      .reduce((sum, v) => sum + v.value, 0);
  const idle = () => eventually(() => sender.open === 0 && outbox.calls.length > 0, { what: 'the dispatcher idle' });
  return { outbox, sender, clock, lines, dispatcher, count, idle };
}

/** Every promise callback queued so far has run. */
const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

let toClose: WebhookDispatcher[] = [];
afterEach(async () => {
  await Promise.all(toClose.map((d) => d.close()));
  toClose = [];
});

function started(d: ReturnType<typeof setUp>) {
  toClose.push(d.dispatcher);
  d.dispatcher.start();
  return d;
}

test('a 2xx finishes the delivery: posted once to its receiver, signed with its secret at the attempt time, counted success', async () => {
  const d = setUp();
  await d.outbox.add([outboxEvent('msg_1', [A.key], T0 - 60_000)], T0, 100);
  started(d);
  await eventually(() => d.outbox.rows.length === 0, { what: 'the delivery finished' });
  expect(d.sender.posts).toHaveLength(1);
  const [post] = d.sender.posts;
  expect(post!.url).toBe(A.url);
  expect(post!.body).toBe(outboxEvent('msg_1', [A.key], T0 - 60_000).body);
  // The timestamp is the attempt's (the clock now), not the event's.
  expect(post!.headers).toEqual({
    'content-type': 'application/json',
    'webhook-id': 'msg_1',
    'webhook-timestamp': String(T0 / 1000),
    'webhook-signature': webhookSignature(A.secret, 'msg_1', T0 / 1000, post!.body),
  });
  expect(await d.count('success')).toBe(1);
  expect(await d.count('failure')).toBe(0);
});

test('a claim is leased for the attempt timeout and 30 s more, and asks for no more than the receiver has room for', async () => {
  const d = setUp();
  await d.outbox.add([outboxEvent('msg_1', [A.key], T0)], T0, 100);
  started(d);
  await d.idle();
  expect(d.outbox.callsOf('claim')[0]).toEqual([A.key, ATTEMPTS_PER_ENDPOINT, T0, T0 + TIMEOUT_MS + 30_000]);
});

test('a failed attempt is tried again by the backoff (5 s, then 30 s), the same id and body each time; a warn line per failure', async () => {
  const answers = [
    { delivered: false as const, reason: 'status 500' },
    { delivered: false as const, reason: 'status 503' },
    { delivered: true as const, status: 200 },
  ];
  const d = started(setUp({ sender: new ScriptedSender(() => answers.shift()!) }));
  await d.outbox.add([outboxEvent('msg_1', [A.key], T0)], T0, 100);
  d.dispatcher.wake();
  await eventually(() => d.outbox.callsOf('retry').length === 1, { what: 'the first retry' });
  expect(d.outbox.rows).toMatchObject([{ eventId: 'msg_1', attempts: 1, dueAt: T0 + 5_000, leaseUntil: null }]);

  // Not due yet: a wake claims nothing.
  d.clock.advance(4_999);
  const claims = d.outbox.callsOf('claim').length;
  d.dispatcher.wake();
  await eventually(() => d.outbox.callsOf('claim').length > claims, { what: 'a claim' });
  await nextTurn();
  expect(d.sender.posts).toHaveLength(1);

  d.clock.advance(1);
  d.dispatcher.wake();
  await eventually(() => d.outbox.callsOf('retry').length === 2, { what: 'the second retry' });
  expect(d.outbox.rows).toMatchObject([{ attempts: 2, dueAt: T0 + 5_000 + 30_000 }]);

  d.clock.set(T0 + 35_000);
  d.dispatcher.wake();
  await eventually(() => d.outbox.rows.length === 0, { what: 'the delivery finished' });
  expect(d.sender.posts.map((p) => [p.headers['webhook-id'], p.body])).toEqual(
    Array(3).fill(['msg_1', d.sender.posts[0]!.body]),
  );
  expect(d.sender.posts.map((p) => Number(p.headers['webhook-timestamp']) - T0 / 1000)).toEqual([0, 5, 35]);
  expect([await d.count('failure'), await d.count('success')]).toEqual([2, 1]);
  const warns = logLinesWith(d.lines, { msg: 'webhook delivery failed; retrying later' });
  expect(warns.map((l) => [l.attempts, l.reason, l.nextAttemptAt, l.url])).toEqual([
    [1, 'status 500', new Date(T0 + 5_000).toISOString(), A.shownUrl],
    [2, 'status 503', new Date(T0 + 35_000).toISOString(), A.shownUrl],
  ]);
});

test('a failure after a day of retries gives the delivery up: finished, counted expired, one error line', async () => {
  const d = started(setUp({ sender: new ScriptedSender(() => ({ delivered: false, reason: 'ECONNREFUSED' })) }));
  // Seen a day ago and retried since: this attempt is the first after 24 hours.
  await d.outbox.add([outboxEvent('msg_old', [A.key], T0 - 86_400_000)], T0, 100);
  d.outbox.rows[0]!.attempts = 12;
  d.dispatcher.wake();
  await eventually(() => d.outbox.rows.length === 0, { what: 'the delivery given up' });
  expect(d.outbox.callsOf('retry')).toEqual([]);
  expect([await d.count('expired'), await d.count('failure')]).toEqual([1, 0]);
  expect(logLinesWith(d.lines, { msg: 'webhook given up after a day of retries' })).toMatchObject([
    { level: 50, webhookId: 'msg_old', attempts: 13, reason: 'ECONNREFUSED' },
  ]);
});

test('a receiver that hangs holds at most ATTEMPTS_PER_ENDPOINT attempts; another receiver is served meanwhile; the rest go as slots free, oldest first', async () => {
  // A hangs: its attempts wait for the test; B answers at once.
  const sender = new ScriptedSender((url) => (url === B.url ? { delivered: true, status: 200 } : null));
  const d = started(setUp({ sender, endpoints: () => [A, B] }));
  const events = Array.from({ length: 6 }, (_, i) => outboxEvent(`msg_a${i}`, [A.key], T0 + i));
  for (const [i, event] of events.entries()) await d.outbox.add([event], T0 - 100 + i, 100);
  await d.outbox.add([outboxEvent('msg_b', [B.key], T0)], T0, 100);
  d.dispatcher.wake();

  const toA = () => sender.postsTo(A.url);
  await eventually(() => sender.postsTo(B.url).length === 1 && toA().length === ATTEMPTS_PER_ENDPOINT, {
    what: 'B delivered while A holds its slots',
  });
  d.dispatcher.wake();
  await eventually(() => d.outbox.callsOf('claim').length >= 4, { what: 'more polls' });
  expect(toA()).toHaveLength(ATTEMPTS_PER_ENDPOINT);
  expect(d.outbox.rows.filter((r) => r.endpoint === B.key)).toEqual([]);

  // Each answer frees a slot, and the next due delivery takes it.
  for (let answered = 0; answered < 6; answered += 1) {
    await eventually(() => toA().length > answered, { what: `attempt ${answered + 1} to A` });
    toA()[answered]!.answer({ delivered: true, status: 200 });
  }
  await eventually(() => d.outbox.rows.length === 0, { what: "A's deliveries finished" });
  expect(toA().map((p) => p.headers['webhook-id'])).toEqual(events.map((e) => e.id));
  expect(sender.mostOpen.get(A.url)).toBe(ATTEMPTS_PER_ENDPOINT);
});

test('a receiver no longer in force is not claimed for: its deliveries wait; none at all asks the outbox nothing', async () => {
  let inForce: readonly Endpoint[] = [A, B];
  const d = started(setUp({ endpoints: () => inForce }));
  await d.idle();
  inForce = [B];
  d.outbox.calls.length = 0;
  await d.outbox.add([outboxEvent('msg_a', [A.key], T0), outboxEvent('msg_b', [B.key], T0)], T0, 100);
  d.dispatcher.wake();
  await eventually(() => d.sender.posts.length === 1, { what: "B's delivery" });
  await d.idle();
  expect(d.sender.posts.map((p) => p.url)).toEqual([B.url]);
  expect(d.outbox.callsOf('claim').map((args) => args[0])).not.toContain(A.key);
  expect(d.outbox.rows).toMatchObject([{ eventId: 'msg_a', attempts: 0, leaseUntil: null }]);

  inForce = [];
  d.outbox.calls.length = 0;
  d.dispatcher.wake();
  d.dispatcher.wake();
  expect(d.outbox.calls).toEqual([]);
});

test('a wake during a poll polls again: an event written mid-poll goes at once, not at the next tick', async () => {
  const d = setUp();
  const held = gate();
  d.outbox.claimGate = held.wait;
  started(d);
  await eventually(() => d.outbox.callsOf('claim').length === 1, { what: 'the first claim' });
  await d.outbox.add([outboxEvent('msg_1', [A.key], T0)], T0, 100);
  d.dispatcher.wake();
  d.outbox.claimGate = null;
  held.open();
  await eventually(() => d.outbox.rows.length === 0, { what: 'the event written mid-poll delivered' });
  expect(d.sender.posts).toHaveLength(1);
});

test('an outbox that does not answer: one warn line a minute, no attempt; a wake once it answers delivers', async () => {
  const d = setUp();
  d.outbox.refuse.claim = [new Error('Connection is closed.'), new Error('Connection is closed.')];
  await d.outbox.add([outboxEvent('msg_1', [A.key], T0)], T0, 100);
  const refusedLines = () => logLinesWith(d.lines, { msg: 'webhook outbox does not answer; deliveries wait' });
  started(d);
  await eventually(() => refusedLines().length === 1, { what: 'the refused claim reported' });
  d.dispatcher.wake();
  await eventually(() => d.outbox.callsOf('claim').length === 2, { what: 'the second refused claim' });
  await nextTurn();
  expect(d.sender.posts).toEqual([]);
  d.dispatcher.wake();
  await eventually(() => d.outbox.rows.length === 0, { what: 'delivered once the outbox answers' });
  // Two refusals within a minute: one line.
  expect(refusedLines()).toMatchObject([{ level: 40, err: 'Connection is closed.' }]);
});

test('an outcome the outbox does not take: not counted, and the delivery is tried again once its lease lapses', async () => {
  const d = setUp();
  d.outbox.refuse.finish = [new Error('Command timed out')];
  await d.outbox.add([outboxEvent('msg_1', [A.key], T0)], T0, 100);
  started(d);
  await eventually(() => d.outbox.callsOf('finish').length === 1, { what: 'the refused finish' });
  await d.idle();
  expect(await d.count('success')).toBe(0);
  expect(d.outbox.rows).toMatchObject([{ eventId: 'msg_1', leaseUntil: T0 + TIMEOUT_MS + 30_000 }]);

  d.clock.set(T0 + TIMEOUT_MS + 30_000);
  d.dispatcher.wake();
  await eventually(() => d.outbox.rows.length === 0, { what: 'delivered again after the lease' });
  expect(d.sender.posts).toHaveLength(2);
  expect(await d.count('success')).toBe(1);
});

test('close aborts attempts in flight: their deliveries are due again at once, no attempt counted, nothing polled after', async () => {
  const d = started(setUp({ sender: new ScriptedSender(null) }));
  await d.outbox.add([outboxEvent('msg_1', [A.key], T0), outboxEvent('msg_2', [A.key], T0)], T0, 100);
  d.dispatcher.wake();
  await eventually(() => d.sender.posts.length === 2, { what: 'two attempts open' });
  d.clock.advance(1_000);
  await d.dispatcher.close();
  expect(d.sender.posts.every((p) => p.stop.aborted)).toBe(true);
  expect(d.outbox.rows).toMatchObject([
    { eventId: 'msg_1', attempts: 0, dueAt: T0 + 1_000, leaseUntil: null },
    { eventId: 'msg_2', attempts: 0, dueAt: T0 + 1_000, leaseUntil: null },
  ]);
  expect(d.outbox.callsOf('retry')).toEqual([]);
  expect(await d.count('failure')).toBe(0);
  const calls = d.outbox.calls.length;
  d.dispatcher.wake();
  d.dispatcher.start();
  expect(d.outbox.calls).toHaveLength(calls);
});

test('close during a claim: what the claim took is given back before close returns, and never posted', async () => {
  const d = setUp();
  const held = gate();
  d.outbox.claimGate = held.wait;
  await d.outbox.add([outboxEvent('msg_1', [A.key], T0)], T0, 100);
  started(d);
  await eventually(() => d.outbox.callsOf('claim').length === 1, { what: 'the claim under way' });
  expect(d.outbox.rows[0]!.leaseUntil).not.toBeNull();
  const closing = d.dispatcher.close();
  // The claim answers only after close was called.
  await nextTurn();
  held.open();
  await closing;
  expect(d.outbox.rows).toMatchObject([{ eventId: 'msg_1', attempts: 0, dueAt: T0, leaseUntil: null }]);
  expect(d.sender.posts).toEqual([]);
});
