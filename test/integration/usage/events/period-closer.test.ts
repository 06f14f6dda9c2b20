import { ManualClock } from '../../../../src/shared/clock';
import { KeyActivity } from '../../../../src/usage/key-activity';
import { UsageRecorder } from '../../../../src/usage/usage-recorder';
import { MemoryKeyActivityStore } from '../../../../src/usage/memory-key-activity-store';
import { SqliteOutbox } from '../../../../src/notifications/sqlite-outbox';
import type { OutboxEvent } from '../../../../src/notifications/outbox';
import { PeriodCloser, USAGE_SINK_ENDPOINT } from '../../../../src/usage/events/period-closer';
import { MemorySentStateStore, type SentState } from '../../../../src/usage/events/sent-state';
import { usageEventId, type UsageCloudEvent } from '../../../../src/usage/events/usage-event';
import type { UsageEventsConfig } from '../../../../src/shared/config';
import { createLogger } from '../../../../src/shared/logger';
import { useTempDirs } from '../../../support/temp-dirs';

/**
 * The closer over the in-process ledger, a real SQLite outbox and a manual clock: when a period is
 * sent, what a late flush becomes, and what a closer that died half-way leaves behind.
 */

const { tempDir } = useTempDirs('asg-closer-');
const PERIOD_MS = 60_000;
const GRACE_MS = 15_000;
const START = Date.UTC(2026, 2, 10, 12, 0, 0);
const config: UsageEventsConfig = {
  enabled: true,
  url: 'http://127.0.0.1:9/api/v1/events',
  source: 'closer-test',
  period: 'minute',
  graceSeconds: GRACE_MS / 1000,
  meters: ['units', 'requests'],
  headers: {},
  tokenFile: null,
  timeoutMs: 1000,
  outboxMaxEvents: 1000,
};

let clock: ManualClock;
let ledger: MemoryKeyActivityStore;
let recorder: KeyActivity;
/** Each instance's usage recorder, closed after each test. */
let usageRecorders: UsageRecorder[] = [];
let state: MemorySentStateStore;
let outbox: SqliteOutbox;

function closer(overrides: Partial<ConstructorParameters<typeof PeriodCloser>[0]> = {}): PeriodCloser {
  return new PeriodCloser({
    ledger,
    state,
    outbox,
    keys: { get: async (id) => ({ plan: 'pro', consumerId: id === 'key_a' ? 'con_1' : null }) },
    config: () => config,
    clock,
    logger: createLogger('silent'),
    onWritten: () => {},
    onDropped: () => {},
    ...overrides,
  });
}

/** Every event waiting in the outbox, parsed. */
async function waiting(): Promise<UsageCloudEvent[]> {
  const claimed = await outbox.claim(USAGE_SINK_ENDPOINT, 1000, clock.now(), clock.now() + 1);
  for (const d of claimed) await outbox.release(d, clock.now());
  return claimed.map((d) => JSON.parse(d.body) as UsageCloudEvent);
}

/** Admitted requests of `units` each, decided now on one instance's recorder. */
/** One instance's usage history over the shared ledger, on a usage recorder of its own (flushed when asked). */
function instance(periodMs: () => number): KeyActivity {
  const usage = new UsageRecorder({ flushIntervalMs: 3_600_000 });
  usageRecorders.push(usage);
  return new KeyActivity(usage, ledger, clock, periodMs);
}

function admit(on: KeyActivity, keyId: string, units: number, dayCount: number): void {
  on.record(keyId, 'admitted');
  on.recordUnits(keyId, units, dayCount, clock.now());
}

beforeEach(() => {
  clock = new ManualClock(START + 1000);
  ledger = new MemoryKeyActivityStore(clock);
  recorder = instance(() => PERIOD_MS);
  state = new MemorySentStateStore();
  outbox = new SqliteOutbox(tempDir());
});

afterEach(async () => {
  await Promise.all(usageRecorders.map((usage) => usage.close()));
  usageRecorders = [];
  outbox.close();
});

test('a period is sent once it has ended and its grace passed, one event per meter, with derived ids', async () => {
  admit(recorder, 'key_a', 3, 3);
  admit(recorder, 'key_a', 1, 4);
  await recorder.flush();
  const closing = closer();
  clock.set(START + PERIOD_MS + GRACE_MS - 1);
  await closing.tick();
  expect(await waiting()).toEqual([]);
  clock.set(START + PERIOD_MS + GRACE_MS);
  await closing.tick();
  const events = await waiting();
  expect(events.map((e) => [e.type, e.subject, e.data.units, e.data.admitted, e.data.revision])).toEqual([
    ['gateway.usage.units', 'con_1', 4, 2, 0],
    ['gateway.usage.requests', 'con_1', 4, 2, 0],
  ]);
  expect(events[0]!.id).toBe(
    usageEventId({
      source: 'closer-test',
      keyId: 'key_a',
      meter: 'units',
      periodMs: PERIOD_MS,
      periodStart: START,
      revision: 0,
    }),
  );
  // Closed again later: nothing new is due, nothing is added.
  clock.advance(PERIOD_MS);
  await closing.tick();
  expect(await waiting()).toHaveLength(2);
});

test('a late flush of a closed period is a correction: a new revision, its own id, the difference', async () => {
  const late = instance(() => PERIOD_MS);
  admit(recorder, 'key_b', 2, 2);
  admit(late, 'key_b', 5, 7);
  await recorder.flush();
  const closing = closer();
  clock.set(START + PERIOD_MS + GRACE_MS);
  await closing.tick();
  // The other instance's flush arrives after the period was sent.
  await late.flush();
  clock.advance(1000);
  await closing.tick();
  const units = (await waiting()).filter((e) => e.type === 'gateway.usage.units');
  expect(units.map((e) => [e.subject, e.data.units, e.data.revision])).toEqual([
    ['key_b', 2, 0],
    ['key_b', 5, 1],
  ]);
  expect(new Set(units.map((e) => e.id)).size).toBe(2);
  expect(units[1]!.time).toBe(units[0]!.time);
});

test('a closer that died between its state and the outbox: the next hands the same events over, once', async () => {
  admit(recorder, 'key_a', 6, 6);
  await recorder.flush();
  clock.set(START + PERIOD_MS + GRACE_MS);
  const dying = closer({
    outbox: {
      ...outbox,
      add: async () => {
        throw new Error('killed before the outbox took them');
      },
    } as unknown as SqliteOutbox,
  });
  await expect(dying.tick()).rejects.toThrow('killed before the outbox took them');
  const held: SentState = await state.read('key_a', PERIOD_MS, Math.floor(START / 86_400_000));
  expect(held.pending.map((e: OutboxEvent) => e.id)).toHaveLength(2);
  // Another instance, once the dead one's lease has run out.
  clock.advance(30_000);
  await closer().tick();
  const events = await waiting();
  expect(events.map((e) => e.id).sort()).toEqual(held.pending.map((e) => e.id).sort());
  expect(events.filter((e) => e.type === 'gateway.usage.units').map((e) => e.data.units)).toEqual([6]);
});

test('two closers at once: one lease, one set of events', async () => {
  admit(recorder, 'key_a', 2, 2);
  await recorder.flush();
  clock.set(START + PERIOD_MS + GRACE_MS);
  await Promise.all([closer().tick(), closer().tick()]);
  expect(await waiting()).toHaveLength(2);
});

test('usage events off: the ledger keeps no periods and the closer sends nothing', async () => {
  const off = instance(() => 0);
  admit(off, 'key_c', 1, 1);
  await off.flush();
  expect(await ledger.touched(10)).toEqual([]);
  clock.set(START + PERIOD_MS + GRACE_MS);
  await closer({ config: () => ({ ...config, enabled: false }) }).tick();
  expect(await waiting()).toEqual([]);
});

test("a period length changed by a reload takes effect the next UTC day: a day's counts are in one length", async () => {
  let periodMs = PERIOD_MS;
  const reloaded = instance(() => periodMs);
  admit(reloaded, 'key_d', 1, 1);
  periodMs = 3_600_000;
  clock.advance(5 * PERIOD_MS);
  admit(reloaded, 'key_d', 1, 2);
  clock.set(START + 86_400_000);
  admit(reloaded, 'key_d', 1, 1);
  await reloaded.flush();
  const day = Math.floor(START / 86_400_000);
  expect((await ledger.touched(10)).map((e) => [e.periodMs, e.day]).sort()).toEqual([
    [3_600_000, day + 1],
    [PERIOD_MS, day],
  ]);
});
