import { CloudEvent } from 'cloudevents';
import { usageCloudEvent, usageEventId } from '../../../../src/usage/events/usage-event';

const base = {
  source: 'gw-eu',
  keyId: 'key_1',
  meter: 'units' as const,
  periodMs: 3_600_000,
  periodStart: Date.UTC(2026, 2, 10, 14),
  revision: 0,
};

test('the id is a UUID derived from source, key, meter, period and revision: the same inputs, the same id', () => {
  const id = usageEventId(base);
  expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  expect(usageEventId({ ...base })).toBe(id);
  const others = [
    { source: 'gw-us' },
    { keyId: 'key_2' },
    { meter: 'requests' as const },
    { periodMs: 60_000 },
    { periodStart: base.periodStart + 3_600_000 },
    { revision: 1 },
  ];
  const ids = new Set(others.map((o) => usageEventId({ ...base, ...o })));
  expect(ids.size).toBe(others.length);
  expect(ids.has(id)).toBe(false);
});

test('the event is a valid CloudEvent 1.0: subject the consumer, else the key; time the period start', () => {
  const figures = { units: 12, admitted: 4, refused: 1, plan: 'pro' };
  const withConsumer = usageCloudEvent({ ...base, ...figures, consumerId: 'con_9' });
  expect(new CloudEvent({ ...withConsumer }, true).validate()).toBe(true);
  expect(withConsumer).toEqual(
    expect.objectContaining({
      specversion: '1.0',
      type: 'gateway.usage.units',
      subject: 'con_9',
      time: '2026-03-10T14:00:00.000Z',
      source: 'gw-eu',
    }),
  );
  expect(withConsumer.data).toEqual({
    keyId: 'key_1',
    consumerId: 'con_9',
    plan: 'pro',
    units: 12,
    admitted: 4,
    refused: 1,
    periodStart: '2026-03-10T14:00:00.000Z',
    periodEnd: '2026-03-10T15:00:00.000Z',
    revision: 0,
  });
  expect(usageCloudEvent({ ...base, ...figures, consumerId: null }).subject).toBe('key_1');
});
