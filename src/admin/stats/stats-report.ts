import { TRAFFIC_HISTORY_SECONDS, type TrafficSecond } from './traffic-recorder';

/** Width of each point of GET /admin/stats: 90 points over 15 minutes. */
export const STATS_STEP_SECONDS = 10;

export interface StatsPoint {
  /** ISO start of the step. */
  start: string;
  byStatus: Record<string, number>;
  byPlan: Record<string, number>;
  rejectionsByWindow: Record<string, number>;
}

export interface StatsReport {
  generatedAt: string;
  windowSeconds: number;
  stepSeconds: number;
  /** Oldest first, zero-filled, one per step; counts (not rates) per step. */
  points: StatsPoint[];
  totals: {
    requests: number;
    byStatus: Record<string, number>;
    byPlan: Record<string, number>;
    rejectionsByWindow: Record<string, number>;
  };
  activeBans: number | null;
  health: Record<string, 'ok' | 'failing'>;
}

function addAll(into: Record<string, number>, from: Record<string, number>): void {
  for (const [key, count] of Object.entries(from)) into[key] = (into[key] ?? 0) + count;
}

/** Sums seconds from several sources (workers) that count the same second. */
export function sumSeconds(sources: TrafficSecond[][]): TrafficSecond[] {
  const bySecond = new Map<number, TrafficSecond>();
  for (const seconds of sources) {
    for (const s of seconds) {
      let into = bySecond.get(s.second);
      if (!into) {
        into = { second: s.second, byStatus: {}, byPlan: {}, rejectionsByWindow: {} };
        bySecond.set(s.second, into);
      }
      addAll(into.byStatus, s.byStatus);
      addAll(into.byPlan, s.byPlan);
      addAll(into.rejectionsByWindow, s.rejectionsByWindow);
    }
  }
  return [...bySecond.values()].sort((a, b) => a.second - b.second);
}

/** Folds per-second counts into zero-filled steps ending with the step that holds `nowMs`. */
export function buildStatsReport(input: {
  seconds: TrafficSecond[];
  nowMs: number;
  activeBans: number | null;
  health: Record<string, 'ok' | 'failing'>;
  stepSeconds?: number;
}): StatsReport {
  const step = input.stepSeconds ?? STATS_STEP_SECONDS;
  const steps = Math.ceil(TRAFFIC_HISTORY_SECONDS / step);
  const nowSecond = Math.floor(input.nowMs / 1000);
  const lastStart = nowSecond - (nowSecond % step);
  const firstStart = lastStart - (steps - 1) * step;
  const points: StatsPoint[] = Array.from({ length: steps }, (_, i) => ({
    start: new Date((firstStart + i * step) * 1000).toISOString(),
    byStatus: {},
    byPlan: {},
    rejectionsByWindow: {},
  }));
  const totals: StatsReport['totals'] = { requests: 0, byStatus: {}, byPlan: {}, rejectionsByWindow: {} };
  for (const s of input.seconds) {
    const index = Math.floor((s.second - firstStart) / step);
    if (index < 0 || index >= steps) continue;
    const point = points[index]!;
    addAll(point.byStatus, s.byStatus);
    addAll(point.byPlan, s.byPlan);
    addAll(point.rejectionsByWindow, s.rejectionsByWindow);
    addAll(totals.byStatus, s.byStatus);
    addAll(totals.byPlan, s.byPlan);
    addAll(totals.rejectionsByWindow, s.rejectionsByWindow);
    totals.requests += Object.values(s.byStatus).reduce((a, b) => a + b, 0);
  }
  return {
    generatedAt: new Date(input.nowMs).toISOString(),
    windowSeconds: steps * step,
    stepSeconds: step,
    points,
    totals,
    activeBans: input.activeBans,
    health: input.health,
  };
}
