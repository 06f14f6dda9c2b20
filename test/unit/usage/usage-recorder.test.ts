import { ManualClock } from '../../../src/shared/clock';
import { DeprecationUsage, type CallTally } from '../../../src/usage/deprecation-usage';
import { KeyActivity, type KeyTally } from '../../../src/usage/key-activity';
import { MemoryDeprecationUsageStore } from '../../../src/usage/memory-deprecation-usage-store';
import { MemoryKeyActivityStore } from '../../../src/usage/memory-key-activity-store';
import { MemoryTopKeysStore, TopKeys, type MinuteTally } from '../../../src/usage/top-keys';
import { UsageRecorder, type UsageConcern } from '../../../src/usage/usage-recorder';

const T0 = Date.UTC(2026, 2, 10, 12, 0, 30);

/** Every write each store was given, in order, and a way to make the next ones fail. */
class WatchedKeyActivity extends MemoryKeyActivityStore {
  writes = 0;
  override async add(day: number, tallies: ReadonlyMap<string, KeyTally>): Promise<void> {
    this.writes++;
    return super.add(day, tallies);
  }
}
class WatchedTopKeys extends MemoryTopKeysStore {
  writes = 0;
  refuse = false;
  override async add(minute: number, tallies: ReadonlyMap<string, MinuteTally>): Promise<void> {
    this.writes++;
    if (this.refuse) throw new Error('redis down');
    return super.add(minute, tallies);
  }
}
class WatchedDeprecations extends MemoryDeprecationUsageStore {
  refused = new Set<string>();
  override async add(route: string, calls: ReadonlyMap<string, CallTally>, day: number): Promise<void> {
    if (this.refused.has(route)) throw new Error(`cannot write ${route}`);
    return super.add(route, calls, day);
  }
}

function setUp(flushIntervalMs = 60_000) {
  const clock = new ManualClock(T0);
  const errors: Array<[UsageConcern, string]> = [];
  const dropped: Array<[UsageConcern, number]> = [];
  const usage = new UsageRecorder({
    flushIntervalMs,
    onWriteError: (concern, err) => errors.push([concern, (err as Error).message]),
    onDropped: (concern, weight) => dropped.push([concern, weight]),
  });
  const stores = {
    keyActivity: new WatchedKeyActivity(clock),
    topKeys: new WatchedTopKeys(),
    deprecations: new WatchedDeprecations(),
  };
  return {
    clock,
    usage,
    errors,
    dropped,
    stores,
    keyActivity: new KeyActivity(usage, stores.keyActivity, clock),
    topKeys: new TopKeys(usage, stores.topKeys, clock),
    deprecations: new DeprecationUsage(usage, stores.deprecations, clock),
  };
}

describe('UsageRecorder: one batched recorder for the three concerns', () => {
  afterEach(() => jest.useRealTimers());

  it('runs one timer for every concern, and that timer writes every buffer', async () => {
    jest.useFakeTimers({ doNotFake: ['Date'] });
    const { usage, keyActivity, topKeys, deprecations, stores } = setUp(5000);
    expect(jest.getTimerCount()).toBe(1);
    keyActivity.record('key_a', 'admitted');
    topKeys.record('key_a', 'admitted');
    deprecations.record('GET /v1/pets/{petId}', 'key_a');
    expect(stores.keyActivity.writes + stores.topKeys.writes).toBe(0);
    await jest.advanceTimersByTimeAsync(5000);
    expect(stores.keyActivity.writes).toBe(1);
    expect(stores.topKeys.writes).toBe(1);
    expect(await stores.deprecations.callers('GET /v1/pets/{petId}', T0)).toHaveLength(1);
    await usage.close();
    expect(jest.getTimerCount()).toBe(0);
  });

  it('a concern whose store refuses is reported and counted under its name; the others are written', async () => {
    const { usage, keyActivity, topKeys, stores, errors, dropped } = setUp();
    stores.topKeys.refuse = true;
    keyActivity.record('key_a', 'admitted');
    for (let i = 0; i < 3; i++) topKeys.record('key_a', 'rateLimited');
    await usage.flush();
    expect(errors).toEqual([['topKeys', 'redis down']]);
    expect(dropped).toEqual([['topKeys', 3]]);
    expect(await keyActivity.lastUsed(['key_a'])).toEqual(new Map([['key_a', T0]]));
    // Dropped, not retried: the ranking is a view of the present.
    stores.topKeys.refuse = false;
    await usage.flush();
    expect(await topKeys.top(5, 10)).toEqual([]);
    await usage.close();
  });

  it("a refused write of one operation's callers loses no other operation's calls", async () => {
    const { usage, deprecations, stores, errors, dropped } = setUp();
    stores.deprecations.refused.add('GET /v1/pets');
    deprecations.record('GET /v1/pets', 'key_a');
    deprecations.record('GET /v1/pets/{petId}', 'key_b');
    deprecations.record('GET /v1/pets/{petId}', 'key_b');
    await usage.flush();
    expect(errors).toEqual([['deprecationUsage', 'cannot write GET /v1/pets']]);
    expect(dropped).toEqual([['deprecationUsage', 1]]);
    expect(await deprecations.callers('GET /v1/pets/{petId}')).toEqual([{ keyId: 'key_b', count: 2, lastCallAt: T0 }]);
    await usage.close();
  });

  it('flushes asked for at once run one after another: every tally is written once', async () => {
    const { usage, keyActivity, stores } = setUp();
    keyActivity.record('key_a', 'admitted');
    await Promise.all([usage.flush(), usage.flush(), keyActivity.flush()]);
    expect(stores.keyActivity.writes).toBe(1);
    expect((await keyActivity.usage('key_a', 1)).days[0]!.admitted).toBe(1);
    await usage.close();
  });

  it('close writes what has gathered and stops the timer', async () => {
    const { usage, topKeys, stores } = setUp();
    topKeys.record('key_a', 'admitted');
    await usage.close();
    expect(await stores.topKeys.top(Math.floor(T0 / 60_000), Math.floor(T0 / 60_000), 10)).toEqual([
      { keyId: 'key_a', requests: 1, rateLimited: 0 },
    ]);
  });
});
