import { ManualClock } from '../../../src/shared/clock';
import { KeyActivity, USAGE_HISTORY_DAYS, type KeyActivityStore, type KeyTally } from '../../../src/usage/key-activity';
import { MemoryKeyActivityStore } from '../../../src/usage/memory-key-activity-store';
import { MAX_RETAINED_TALLIES, UsageRecorder } from '../../../src/usage/usage-recorder';

const DAY = 86_400_000;

/** The in-process store, with every batch it was given kept for the test to look at. */
class WatchedStore extends MemoryKeyActivityStore {
  readonly batches: Array<{ day: number; tallies: Map<string, KeyTally> }> = [];
  failNext = false;
  override async add(day: number, tallies: ReadonlyMap<string, KeyTally>): Promise<void> {
    if (this.failNext) {
      this.failNext = false;
      throw new Error('store down');
    }
    this.batches.push({ day, tallies: new Map([...tallies].map(([k, v]) => [k, { ...v }])) });
    return super.add(day, tallies);
  }
}

let clock: ManualClock;
let store: WatchedStore;
let usage: UsageRecorder;
let recorder: KeyActivity;
let errors: unknown[];
let dropped: number[];

/** A recorder of its own over `on`, with what it reports kept in `errors` and `dropped`. */
function keyActivityOn(on: KeyActivityStore): { usage: UsageRecorder; activity: KeyActivity } {
  const own = new UsageRecorder({
    flushIntervalMs: 60_000,
    onWriteError: (_concern, err) => errors.push(err),
    onDropped: (_concern, requests) => dropped.push(requests),
  });
  return { usage: own, activity: new KeyActivity(own, on, clock) };
}

beforeEach(() => {
  clock = new ManualClock(Date.UTC(2026, 2, 10, 23, 59, 59));
  store = new WatchedStore();
  errors = [];
  dropped = [];
  ({ usage, activity: recorder } = keyActivityOn(store));
});

afterEach(async () => {
  await usage.close();
});

describe('KeyActivity (its buffer of the UsageRecorder)', () => {
  it('tallies in memory and writes nothing until a flush; one batch per UTC day', async () => {
    recorder.record('key_a', 'admitted');
    recorder.record('key_a', 'rateLimited');
    clock.advance(1000); // past midnight
    recorder.record('key_a', 'admitted');
    recorder.record('key_a', 'banned');
    recorder.record('key_b', 'admitted');
    expect(store.batches).toEqual([]);
    await recorder.flush();
    expect(store.batches.map((b) => b.day)).toEqual([Date.UTC(2026, 2, 10) / DAY, Date.UTC(2026, 2, 11) / DAY]);
    const usage = await recorder.usage('key_a', 2);
    expect(usage).toEqual({
      keyId: 'key_a',
      days: [
        { date: '2026-03-10', admitted: 1, rateLimited: 1, banned: 0 },
        { date: '2026-03-11', admitted: 1, rateLimited: 0, banned: 1 },
      ],
    });
  });

  it('last use is the latest admitted request, not a refused one', async () => {
    recorder.record('key_a', 'admitted');
    const admittedAt = clock.now();
    clock.advance(500);
    recorder.record('key_a', 'rateLimited');
    recorder.record('key_b', 'banned');
    expect(await recorder.lastUsed(['key_a', 'key_b'])).toEqual(new Map([['key_a', admittedAt]]));
  });

  it('batches from two recorders on one store add up', async () => {
    const other = keyActivityOn(store);
    for (let i = 0; i < 7; i++) recorder.record('key_a', 'admitted');
    for (let i = 0; i < 5; i++) other.activity.record('key_a', 'admitted');
    await other.usage.close();
    expect((await recorder.usage('key_a', 1)).days[0]!.admitted).toBe(12);
  });

  it('a batch a store with safe retries refuses is kept and sent with the next flush, counted once', async () => {
    recorder.record('key_a', 'admitted');
    recorder.record('key_a', 'banned');
    store.failNext = true;
    await recorder.flush();
    expect(errors).toHaveLength(1);
    expect(store.batches).toEqual([]);
    recorder.record('key_a', 'admitted');
    await recorder.flush();
    expect(store.batches).toHaveLength(1);
    expect((await recorder.usage('key_a', 1)).days[0]).toMatchObject({ admitted: 2, banned: 1 });
    expect(await recorder.lastUsed(['key_a'])).toEqual(new Map([['key_a', clock.now()]]));
  });

  it('a batch a store without safe retries refuses is dropped and counted, never written twice', async () => {
    const unsafe = new (class extends WatchedStore {
      override readonly retriesAreSafe = false;
    })();
    const other = keyActivityOn(unsafe);
    other.activity.record('key_a', 'admitted');
    other.activity.record('key_a', 'rateLimited');
    unsafe.failNext = true;
    await other.activity.flush();
    expect(dropped).toEqual([2]);
    other.activity.record('key_a', 'admitted');
    expect((await other.activity.usage('key_a', 1)).days[0]!.admitted).toBe(1);
    await other.usage.close();
  });

  it(`keeps at most ${MAX_RETAINED_TALLIES} refused key-day tallies, dropping the oldest day first and counting its requests`, async () => {
    const refusing = new (class extends WatchedStore {
      refuse = true;
      override async add(day: number, tallies: ReadonlyMap<string, KeyTally>): Promise<void> {
        if (this.refuse) throw new Error('disk full');
        return super.add(day, tallies);
      }
    })();
    const { usage: boundedUsage, activity: bounded } = keyActivityOn(refusing);
    bounded.record('old_key', 'admitted');
    bounded.record('old_key', 'rateLimited');
    await bounded.flush();
    expect(dropped).toEqual([]); // one tally kept
    clock.advance(DAY);
    for (let i = 0; i < MAX_RETAINED_TALLIES; i++) bounded.record(`key_${i}`, 'admitted');
    await bounded.flush();
    // One tally over the bound: the older day goes whole, its two requests counted.
    expect(dropped).toEqual([2]);
    refusing.refuse = false;
    await bounded.flush();
    expect((await bounded.usage('key_7', 1)).days[0]!.admitted).toBe(1);
    expect((await bounded.usage('old_key', 2)).days[0]).toMatchObject({ admitted: 0, rateLimited: 0 });
    await boundedUsage.close();
  });

  it(`keeps ${USAGE_HISTORY_DAYS} days`, async () => {
    recorder.record('key_a', 'admitted');
    await recorder.flush();
    clock.advance(USAGE_HISTORY_DAYS * DAY);
    recorder.record('key_a', 'admitted');
    await recorder.flush();
    const days = (await recorder.usage('key_a', USAGE_HISTORY_DAYS)).days;
    expect(days).toHaveLength(USAGE_HISTORY_DAYS);
    expect(days.reduce((sum, d) => sum + d.admitted, 0)).toBe(1);
  });
});
