import { ManualClock } from '../../../src/shared/clock';
import { KeyActivity } from '../../../src/usage/key-activity';
import { UsageRecorder } from '../../../src/usage/usage-recorder';
import { MemoryKeyActivityStore } from '../../../src/usage/memory-key-activity-store';
import { keyDecisionListener } from '../../../src/product/notifications';
import { createDecisionWatch } from '../../../src/notifications/decision-watch';
import type { WebhookEvent } from '../../../src/notifications/events';
import type { Notifier } from '../../../src/notifications/notifier';
import type { KeyDecision } from '../../../src/limits/types';
import type { ApiKeyRecord } from '../../../src/keys/types';

/**
 * Leases (issue 50) and what learns from decisions: a take's thresholds count its lease's units (up
 * to a lease early, never late), lease admissions pass none, and the usage history takes the
 * windows as requests used them.
 */

const NOW = Date.UTC(2026, 2, 10, 12, 0, 0);
const DAY_END = Date.UTC(2026, 2, 11);
const record = { id: 'key_l' } as ApiKeyRecord;

/** An admitted decision whose day window (limit 100) shows `used` units used. */
function allowed(used: number, extra: Partial<Extract<KeyDecision, { outcome: 'allowed' }>> = {}): KeyDecision {
  return {
    outcome: 'allowed',
    minute: { limit: 1_000, remaining: 1_000 - used, resetAt: NOW + 60_000 },
    day: { limit: 100, remaining: 100 - used, resetAt: DAY_END },
    now: NOW,
    ...extra,
  };
}

function setUp() {
  const events: WebhookEvent[] = [];
  const watch = createDecisionWatch({ banDurationMs: 60_000, wanted: () => true, emit: (e) => events.push(e) });
  const notifier = { watchDecision: watch } as unknown as Notifier;
  const store = new MemoryKeyActivityStore();
  const usage = new UsageRecorder({ flushIntervalMs: 3_600_000 });
  const activity = new KeyActivity(usage, store, new ManualClock(NOW), () => 60_000);
  return { events, listen: keyDecisionListener(activity, notifier), activity, store, usage };
}

const thresholds = (events: WebhookEvent[]) =>
  events.map((e) => (JSON.parse(e.body) as { data: { threshold: number } }).data.threshold);

test('a take passes the thresholds its lease units reach (early, never late); lease admissions pass none', async () => {
  const { events, listen, activity, store, usage } = setUp();
  // Used 70 with this request; the store counted 15 more for the lease: 85 in the window.
  listen(record, allowed(70, { leaseUnits: 15 }), 1);
  expect(thresholds(events)).toEqual([80]);
  for (let used = 71; used <= 85; used++) listen(record, allowed(used, { fromLease: true }), 1);
  expect(thresholds(events)).toEqual([80]);
  // The usage history took what requests used: 16 units, the day window's count at 85.
  await activity.flush();
  const day = Math.floor(NOW / 86_400_000);
  expect(await store.usageDays(['key_l'], day, day)).toEqual([expect.objectContaining({ units: 16, dayCount: 85 })]);
  await usage.close();
});

test('a take whose lease ends at the limit passes 90 and 100 % at once; nothing later passes them again', () => {
  const { events, listen } = setUp();
  listen(record, allowed(86, { leaseUnits: 14 }), 1);
  expect(thresholds(events)).toEqual([90, 100]);
  for (let used = 87; used <= 100; used++) listen(record, allowed(used, { fromLease: true }), 1);
  expect(thresholds(events)).toEqual([90, 100]);
});
