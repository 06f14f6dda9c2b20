import { Registry } from 'prom-client';
import { ManualClock } from '../../../../src/shared/clock';
import { createGatewayMetrics } from '../../../../src/shared/metrics/metrics';
import { statusClass, TRAFFIC_HISTORY_SECONDS, TrafficRecorder } from '../../../../src/admin/stats/traffic-recorder';

function setUp() {
  const metrics = createGatewayMetrics(new Registry());
  const clock = new ManualClock(Date.UTC(2026, 10, 23, 7, 0, 0));
  const recorder = new TrafficRecorder(metrics, clock);
  const answered = (status: string, plan: string, times = 1) => {
    for (let i = 0; i < times; i++)
      metrics.httpRequests.inc({ method: 'GET', route: '/v1/pets', status_code: status, plan });
  };
  return { metrics, clock, recorder, answered };
}

test('status classes: 429 apart from the other 4xx', () => {
  expect([200, 204, 301, 404, 429, 503].map(statusClass)).toEqual(['2xx', '2xx', '3xx', '4xx', '429', '5xx']);
});

test('the first sample is the baseline: what was counted before it is not recent traffic', async () => {
  const { recorder, answered, clock } = setUp();
  answered('200', 'free', 5);
  await recorder.sample();
  clock.advance(1000);
  answered('200', 'free', 2);
  await recorder.sample();
  expect(recorder.seconds().map((s) => s.byStatus)).toEqual([{}, { '2xx': 2 }]);
});

test('each second holds the increase since the last sample, by status class, plan and refusing window', async () => {
  const { recorder, answered, metrics, clock } = setUp();
  await recorder.sample();
  clock.advance(1000);
  answered('200', 'free', 3);
  answered('429', 'pro');
  metrics.rejections.inc({ plan: 'pro', window: 'minute' });
  // A series first seen after the baseline counts from zero.
  answered('401', 'anonymous');
  await recorder.sample();
  clock.advance(1000);
  answered('200', 'free');
  await recorder.sample();
  const [, first, second] = recorder.seconds();
  expect(first).toEqual({
    second: Date.UTC(2026, 10, 23, 7, 0, 1) / 1000,
    byStatus: { '2xx': 3, '429': 1, '4xx': 1 },
    byPlan: { free: 3, pro: 1, anonymous: 1 },
    rejectionsByWindow: { minute: 1 },
  });
  expect(second).toEqual({
    second: first!.second + 1,
    byStatus: { '2xx': 1 },
    byPlan: { free: 1 },
    rejectionsByWindow: {},
  });
});

test('seconds older than the 15-minute ring are gone, and a reused slot starts empty', async () => {
  const { recorder, answered, clock } = setUp();
  await recorder.sample();
  clock.advance(1000);
  answered('200', 'free');
  await recorder.sample();
  clock.advance(TRAFFIC_HISTORY_SECONDS * 1000);
  expect(recorder.seconds()).toEqual([]);
  answered('500', 'free');
  await recorder.sample();
  expect(recorder.seconds().map((s) => s.byStatus)).toEqual([{ '5xx': 1 }]);
});
