import { createDecisionWatch } from '../../../src/notifications/decision-watch';
import { eventId, type WebhookEvent } from '../../../src/notifications/events';
import type { KeyDecision } from '../../../src/limits/types';

const NOW = Date.UTC(2026, 2, 10, 12, 30);
const DAY_START = Date.UTC(2026, 2, 10);
const DAY_END = Date.UTC(2026, 2, 11);
const KEY = { id: 'key_a' };

function allowed(
  dayUsed: number,
  dayLimit: number,
  month?: { used: number; limit: number; startAt: number; resetAt: number },
): KeyDecision {
  return {
    outcome: 'allowed',
    minute: { limit: 100, remaining: 50, resetAt: NOW + 30_000 },
    day: { limit: dayLimit, remaining: dayLimit - dayUsed, resetAt: DAY_END },
    ...(month
      ? {
          month: {
            limit: month.limit,
            remaining: month.limit - month.used,
            resetAt: month.resetAt,
            startAt: month.startAt,
            credits: 0,
          },
        }
      : {}),
    now: NOW,
  };
}

function watch(wanted: (type: string) => boolean = () => true) {
  const events: WebhookEvent[] = [];
  const decide = createDecisionWatch({ banDurationMs: 900_000, wanted, emit: (e) => events.push(e) });
  return {
    decide,
    events,
    bodies: () => events.map((e) => JSON.parse(e.body) as { type: string; data: Record<string, unknown> }),
  };
}

test('an admitted request that passes 80 % of the day: one quota.threshold, named by key, window, day and threshold', () => {
  const { decide, events, bodies } = watch();
  decide(KEY, allowed(7, 10), 1);
  expect(events).toEqual([]);
  decide(KEY, allowed(8, 10), 1);
  expect(events.map((e) => ({ id: e.id, type: e.type, createdAt: e.createdAt, seenUntil: e.seenUntil }))).toEqual([
    {
      id: eventId('quota.threshold', 'key', 'key_a', 'day', DAY_START, 80),
      type: 'quota.threshold',
      createdAt: NOW,
      seenUntil: DAY_END + 86_400_000,
    },
  ]);
  expect(bodies()).toEqual([
    {
      type: 'quota.threshold',
      timestamp: new Date(NOW).toISOString(),
      data: {
        keyId: 'key_a',
        consumerId: null,
        window: 'day',
        threshold: 80,
        limit: 10,
        used: 8,
        periodEnd: new Date(DAY_END).toISOString(),
      },
    },
  ]);
});

test('the month window too, its period from the billing day', () => {
  const { decide, bodies, events } = watch();
  const month = { used: 90, limit: 100, startAt: Date.UTC(2026, 2, 1), resetAt: Date.UTC(2026, 3, 1) };
  decide(KEY, allowed(1, 10, month), 1);
  expect(bodies().map((b) => [b.data.window, b.data.threshold, b.data.used, b.data.periodEnd])).toEqual([
    ['month', 90, 90, '2026-04-01T00:00:00.000Z'],
  ]);
  expect(events[0]!.id).toBe(eventId('quota.threshold', 'key', 'key_a', 'month', Date.UTC(2026, 2, 1), 90));
});

test('the same crossing seen twice (a retried enqueue, another process) has the same id and body', () => {
  const first = watch();
  const second = watch();
  first.decide(KEY, allowed(10, 10), 2);
  second.decide(KEY, allowed(10, 10), 2);
  expect(first.events).toEqual(second.events);
  expect(first.events.map((e) => JSON.parse(e.body).data.threshold)).toEqual([90, 100]);
});

test('the refusal that bans a key: key.banned, ending the ban duration after the decision', () => {
  const { decide, bodies, events } = watch();
  const limited: KeyDecision = {
    outcome: 'limited',
    refusedBy: 'minute',
    minute: { limit: 1, remaining: 0, resetAt: NOW + 30_000 },
    day: { limit: 10, remaining: 9, resetAt: DAY_END },
    retryAfterMs: 30_000,
    bannedNow: false,
    now: NOW,
  };
  decide(KEY, limited, 1);
  expect(events).toEqual([]);
  decide(KEY, { ...limited, bannedNow: true }, 1);
  expect(bodies()).toEqual([
    {
      type: 'key.banned',
      timestamp: new Date(NOW).toISOString(),
      data: { keyId: 'key_a', consumerId: null, bannedUntil: new Date(NOW + 900_000).toISOString() },
    },
  ]);
  expect(events[0]!.id).toBe(eventId('key.banned', 'key_a', NOW + 900_000));
  // A request of a key already banned is no new ban.
  decide(KEY, { outcome: 'banned', bannedUntil: NOW + 900_000, now: NOW + 1 }, 1);
  expect(events).toHaveLength(1);
});

test('nothing without a receiver for the type, and nothing from a decision taken without the shared store', () => {
  const none = watch(() => false);
  none.decide(KEY, allowed(8, 10), 1);
  expect(none.events).toEqual([]);
  const fallback = watch();
  fallback.decide(KEY, { ...allowed(8, 10), fallback: 'local' }, 1);
  expect(fallback.events).toEqual([]);
});

test("a key's consumer is named in the event", () => {
  const { decide, bodies } = watch();
  decide({ id: 'key_a', consumerId: 'con_1' }, allowed(8, 10), 1);
  expect(bodies()[0]!.data.consumerId).toBe('con_1');
});
