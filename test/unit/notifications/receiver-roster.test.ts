import { ManualClock } from '../../../src/shared/clock';
import type { WebhookEventType } from '../../../src/shared/config';
import type { Receiver } from '../../../src/notifications/endpoints';
import {
  MAX_DROPS_PER_CALL,
  ReceiverRoster,
  ROSTER_LIVENESS_MS,
  ROSTER_REFRESH_MS,
} from '../../../src/notifications/receiver-roster';
import { logLinesWith } from '../../support/log-lines';
import { capturedLogger, gate, MemoryOutbox } from './notifications-kit';

/**
 * The roster (src/notifications/receiver-roster.ts): when an instance names its receivers to the
 * outbox (at start, soon after a reload, every ROSTER_REFRESH_MS), what it does with the drops
 * that answers (a receiver removed from the config everywhere), with a refusal, and at close. Jest's
 * fake timers move the checks and performance.now(); the outbox's own side: outbox-contract.ts.
 */

const T0 = Date.UTC(2026, 2, 10, 12);
const receiver = (key: string): Receiver => ({ key, events: new Set<WebhookEventType>(['quota.threshold']) });

function setUp(initial: readonly Receiver[] = [receiver('ep-a'), receiver('ep-b')]) {
  const outbox = new MemoryOutbox();
  const clock = new ManualClock(T0);
  const { logger, lines } = capturedLogger();
  const dropped: WebhookEventType[][] = [];
  const inForce = { receivers: initial };
  const roster = new ReceiverRoster({
    outbox,
    clock,
    logger,
    receivers: () => inForce.receivers,
    onDropped: (types) => dropped.push([...types]),
  });
  const namings = () => outbox.callsOf('keepReceivers');
  return { outbox, clock, lines, dropped, inForce, roster, namings };
}

let rosters: ReceiverRoster[] = [];
beforeEach(() => jest.useFakeTimers());
afterEach(async () => {
  jest.useRealTimers();
  await Promise.all(rosters.map((r) => r.close()));
  rosters = [];
});

function started(r: ReturnType<typeof setUp>) {
  rosters.push(r.roster);
  r.roster.start();
  return r;
}

test("start names the config's receivers at once, believed for ROSTER_LIVENESS_MS, at most MAX_DROPS_PER_CALL dropped", async () => {
  const r = started(setUp());
  await jest.advanceTimersByTimeAsync(0);
  expect(r.namings()).toEqual([
    [expect.any(String), ['ep-a', 'ep-b'], T0, T0 + ROSTER_LIVENESS_MS, MAX_DROPS_PER_CALL],
  ]);
});

test('nothing changed: named again every ROSTER_REFRESH_MS, not more often, under the same instance name', async () => {
  const r = started(setUp());
  await jest.advanceTimersByTimeAsync(ROSTER_REFRESH_MS - 1);
  expect(r.namings()).toHaveLength(1);
  await jest.advanceTimersByTimeAsync(1_000);
  expect(r.namings()).toHaveLength(2);
  await jest.advanceTimersByTimeAsync(ROSTER_REFRESH_MS);
  expect(r.namings()).toHaveLength(3);
  expect(new Set(r.namings().map((args) => args[0])).size).toBe(1);
  // Another process names its own.
  const other = started(setUp());
  await jest.advanceTimersByTimeAsync(0);
  expect(other.namings()[0]![0]).not.toBe(r.namings()[0]![0]);
});

test('a reload is named within half a second: a receiver removed is no longer named by this instance', async () => {
  const r = started(setUp());
  await jest.advanceTimersByTimeAsync(1_000);
  r.inForce.receivers = [receiver('ep-b')];
  await jest.advanceTimersByTimeAsync(500);
  expect(r.namings().map((args) => args[1])).toEqual([['ep-a', 'ep-b'], ['ep-b']]);
});

test('drops are counted; a full batch asks again at the next check, until less than a batch comes back', async () => {
  const r = setUp();
  const full = Array<WebhookEventType>(MAX_DROPS_PER_CALL).fill('key.banned');
  r.outbox.keepAnswers.push(full, ['quota.threshold', 'key.expiring']);
  started(r);
  await jest.advanceTimersByTimeAsync(500);
  expect(r.namings()).toHaveLength(2);
  expect(r.dropped.map((types) => types.length)).toEqual([MAX_DROPS_PER_CALL, 2]);
  await jest.advanceTimersByTimeAsync(5_000);
  expect(r.namings()).toHaveLength(2);
});

test('a call under way is never doubled, however many checks pass meanwhile', async () => {
  const r = setUp();
  const held = gate();
  r.outbox.keepGate = held.wait;
  started(r);
  r.inForce.receivers = [receiver('ep-c')];
  await jest.advanceTimersByTimeAsync(3_000);
  expect(r.namings()).toHaveLength(1);
  r.outbox.keepGate = null;
  held.open();
  // The reload seen by the next check.
  await jest.advanceTimersByTimeAsync(500);
  expect(r.namings().map((args) => args[1])).toEqual([['ep-a', 'ep-b'], ['ep-c']]);
});

test('an outbox that refuses: tried again 2 s later (not at every check), one warn line a minute, nothing dropped', async () => {
  const r = setUp();
  const down = new Error('Connection is closed.');
  r.outbox.refuse.keepReceivers = [down, down, down];
  started(r);
  await jest.advanceTimersByTimeAsync(1_999);
  expect(r.namings()).toHaveLength(1);
  await jest.advanceTimersByTimeAsync(500);
  expect(r.namings()).toHaveLength(2);
  await jest.advanceTimersByTimeAsync(2_500);
  expect(r.namings()).toHaveLength(3);
  expect(
    logLinesWith(r.lines, { msg: 'webhook outbox does not answer; the receivers in force are named again later' }),
  ).toHaveLength(1);
  // It answers again: back to the refresh period.
  await jest.advanceTimersByTimeAsync(2_500);
  expect(r.namings()).toHaveLength(4);
  await jest.advanceTimersByTimeAsync(5_000);
  expect(r.namings()).toHaveLength(4);
  expect(r.dropped).toEqual([]);
});

test('close: no more naming, and the outbox forgets this instance at once (a refusal there is no error)', async () => {
  const r = started(setUp());
  await jest.advanceTimersByTimeAsync(0);
  const instance = r.namings()[0]![0];
  r.outbox.refuse.forgetInstance = [new Error('Connection is closed.')];
  await r.roster.close();
  rosters = [];
  expect(r.outbox.callsOf('forgetInstance')).toEqual([[instance]]);
  r.inForce.receivers = [];
  await jest.advanceTimersByTimeAsync(3 * ROSTER_REFRESH_MS);
  expect(r.namings()).toHaveLength(1);
});
