import { ManualClock } from '../../../src/shared/clock';
import { KeyActivity } from '../../../src/usage/key-activity';
import { UsageRecorder } from '../../../src/usage/usage-recorder';
import { MemoryKeyActivityStore } from '../../../src/usage/memory-key-activity-store';
import { keyDecisionListener } from '../../../src/product/notifications';
import type { Notifier } from '../../../src/notifications/notifier';
import type { KeyDecision } from '../../../src/limits/types';
import type { ApiKeyRecord } from '../../../src/keys/types';

/**
 * Issue 53: the usage history's day count (what makes a killed instance's unflushed units good)
 * learns from refusals too, since a key may be refused for the rest of the day after the kill.
 */

const NOW = Date.UTC(2026, 2, 10, 12, 0, 0);
const window = (limit: number, remaining: number) => ({ limit, remaining, reset: NOW + 60_000 });
const record = { id: 'key_r' } as ApiKeyRecord;
const notifier = { watchDecision: () => {} } as unknown as Notifier;

test("a refusal reports the day window's count to the usage history (and its period), taking no unit", async () => {
  const store = new MemoryKeyActivityStore();
  const usage = new UsageRecorder({ flushIntervalMs: 3_600_000 });
  const recorder = new KeyActivity(usage, store, new ManualClock(NOW), () => 60_000);
  const listen = keyDecisionListener(recorder, notifier);
  const limited = {
    outcome: 'limited',
    refusedBy: 'minute',
    minute: window(9, 0),
    day: window(1000, 982),
    retryAfterMs: 1000,
    bannedNow: false,
    now: NOW,
  } as unknown as KeyDecision;
  listen(record, limited, 1);
  await recorder.flush();
  const day = Math.floor(NOW / 86_400_000);
  expect(await store.usageDays(['key_r'], day, day)).toEqual([expect.objectContaining({ units: 0, dayCount: 18 })]);
  expect([...(await store.periodsOf('key_r', 60_000, day)).values()]).toEqual([
    { units: 0, dayCount: 18, admitted: 0, refused: 0 },
  ]);
  await usage.close();
});
