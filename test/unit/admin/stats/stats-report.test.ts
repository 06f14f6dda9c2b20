import { buildStatsReport, STATS_STEP_SECONDS, sumSeconds } from '../../../../src/admin/stats/stats-report';
import type { TrafficSecond } from '../../../../src/admin/stats/traffic-recorder';

const NOW = Date.UTC(2026, 10, 23, 7, 0, 7, 500);
const nowSecond = Math.floor(NOW / 1000);

test('90 zero-filled steps of 10 s, oldest first, the last one holding now', () => {
  const report = buildStatsReport({ seconds: [], nowMs: NOW, activeBans: 0, health: { store: 'ok', upstream: 'ok' } });
  expect(report.points).toHaveLength(90);
  expect(report.stepSeconds).toBe(STATS_STEP_SECONDS);
  expect(report.windowSeconds).toBe(900);
  expect(report.points.at(-1)!.start).toBe('2026-11-23T07:00:00.000Z');
  expect(report.points[0]!.start).toBe('2026-11-23T06:45:10.000Z');
  expect(report.totals).toEqual({ requests: 0, byStatus: {}, byPlan: {}, rejectionsByWindow: {} });
});

test('seconds fold into their step and into the totals; seconds outside the window are left out', () => {
  const second = (offset: number, ok: number) => ({
    second: nowSecond + offset,
    byStatus: { '2xx': ok },
    byPlan: { free: ok },
    rejectionsByWindow: {},
  });
  const report = buildStatsReport({
    seconds: [second(-7, 1), second(0, 2), second(-8, 4), second(-2000, 100)],
    nowMs: NOW,
    activeBans: null,
    health: { store: 'failing', upstream: 'ok' },
  });
  expect(report.points.at(-1)!.byStatus).toEqual({ '2xx': 3 });
  expect(report.points.at(-2)!.byStatus).toEqual({ '2xx': 4 });
  expect(report.totals).toEqual({ requests: 7, byStatus: { '2xx': 7 }, byPlan: { free: 7 }, rejectionsByWindow: {} });
  expect(report.activeBans).toBeNull();
  expect(report.health).toEqual({ store: 'failing', upstream: 'ok' });
});

test("several workers' seconds are summed second by second", () => {
  const a: TrafficSecond[] = [{ second: 10, byStatus: { '2xx': 1 }, byPlan: { free: 1 }, rejectionsByWindow: {} }];
  const b: TrafficSecond[] = [
    { second: 10, byStatus: { '2xx': 2, '429': 1 }, byPlan: { free: 3 }, rejectionsByWindow: { minute: 1 } },
    { second: 9, byStatus: { '5xx': 1 }, byPlan: { pro: 1 }, rejectionsByWindow: {} },
  ];
  expect(sumSeconds([a, b])).toEqual([
    { second: 9, byStatus: { '5xx': 1 }, byPlan: { pro: 1 }, rejectionsByWindow: {} },
    { second: 10, byStatus: { '2xx': 3, '429': 1 }, byPlan: { free: 4 }, rejectionsByWindow: { minute: 1 } },
  ]);
});
