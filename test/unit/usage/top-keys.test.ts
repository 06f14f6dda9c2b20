import { ManualClock } from '../../../src/shared/clock';
import { MAX_KEYS_PER_MINUTE, MemoryTopKeysStore, TopKeys } from '../../../src/usage/top-keys';
import { UsageRecorder } from '../../../src/usage/usage-recorder';

const T0 = Date.UTC(2026, 2, 10, 12, 0, 30);

test('the busiest keys over the span: most requests first, refusals beside them, minutes outside the span left out', async () => {
  const clock = new ManualClock(T0);
  const usage = new UsageRecorder({ flushIntervalMs: 60_000 });
  const recorder = new TopKeys(usage, new MemoryTopKeysStore(), clock);
  try {
    for (let i = 0; i < 3; i++) recorder.record('key_a', 'admitted');
    recorder.record('key_b', 'admitted');
    recorder.record('key_b', 'rateLimited');
    recorder.record('key_b', 'banned');
    recorder.record('key_b', 'banned');
    clock.advance(10 * 60_000);
    recorder.record('key_a', 'admitted');
    expect(await recorder.top(60, 20)).toEqual(
      [
        { keyId: 'key_b', requests: 4, rateLimited: 3 },
        { keyId: 'key_a', requests: 4, rateLimited: 0 },
      ].sort((x, y) => y.requests - x.requests || x.keyId.localeCompare(y.keyId)),
    );
    // The last 5 minutes hold only the latest request.
    expect(await recorder.top(5, 20)).toEqual([{ keyId: 'key_a', requests: 1, rateLimited: 0 }]);
    expect(await recorder.top(60, 1)).toHaveLength(1);
  } finally {
    await usage.close();
  }
});

test('a minute keeps its busiest keys once it is over, and an hour of minutes at most', async () => {
  const store = new MemoryTopKeysStore();
  const minute = Math.floor(T0 / 60_000);
  const tallies = new Map(
    Array.from({ length: MAX_KEYS_PER_MINUTE + 10 }, (_, i) => [
      `key_${String(i).padStart(5, '0')}`,
      { requests: i + 1, rateLimited: 0 },
    ]),
  );
  await store.add(minute, tallies);
  await store.add(minute + 1, new Map([['key_new', { requests: 1, rateLimited: 0 }]]));
  const top = await store.top(minute, minute, MAX_KEYS_PER_MINUTE + 10);
  expect(top).toHaveLength(MAX_KEYS_PER_MINUTE);
  // The ten quietest went.
  expect(top.at(-1)!.requests).toBe(11);
  await store.add(minute + 62, new Map([['key_late', { requests: 1, rateLimited: 0 }]]));
  expect(await store.top(minute, minute, 10)).toEqual([]);
});
