import type { Counter } from 'prom-client';
import type { Clock } from '../../shared/clock';

/** Seconds of history kept: the console's overview shows the last 15 minutes. */
export const TRAFFIC_HISTORY_SECONDS = 900;

/** One second of traffic, as counts keyed by status class, plan and refusing window. */
export interface TrafficSecond {
  /** Unix second this slot counts. */
  second: number;
  byStatus: Record<string, number>;
  byPlan: Record<string, number>;
  rejectionsByWindow: Record<string, number>;
}

/** The counters the recorder reads: the gateway's own metrics, so the request path does nothing more. */
export interface TrafficCounters {
  httpRequests: Counter<'method' | 'route' | 'status_code' | 'plan'>;
  rejections: Counter<'plan' | 'window'>;
}

/** 200 → "2xx"; 429 stays apart from the other 4xx because it is the limiter's answer. */
export function statusClass(statusCode: string | number): string {
  const code = String(statusCode);
  return code === '429' ? '429' : `${code[0] ?? '?'}xx`;
}

function add(into: Record<string, number>, key: string, count: number): void {
  if (count > 0) into[key] = (into[key] ?? 0) + count;
}

/**
 * Reads the gateway's counters once a second and keeps each second's increase in a ring of
 * TRAFFIC_HISTORY_SECONDS slots. Sampling the counters (rather than a hook per request) keeps the
 * request path as it is: no extra work, no Redis round trip.
 */
export class TrafficRecorder {
  private readonly ring: Array<TrafficSecond | undefined> = new Array(TRAFFIC_HISTORY_SECONDS);
  private readonly previous = new Map<string, number>();
  private timer: NodeJS.Timeout | null = null;
  private baselineTaken = false;

  constructor(
    private readonly counters: TrafficCounters,
    private readonly clock: Clock,
  ) {}

  start(intervalMs = 1000): void {
    if (this.timer) return;
    // The first sample only sets the baseline: what was counted before start is not "recent".
    void this.sample().catch(() => undefined);
    this.timer = setInterval(() => void this.sample().catch(() => undefined), intervalMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  /** Adds the counters' increase since the last sample to the current second's slot. */
  async sample(): Promise<void> {
    const second = Math.floor(this.clock.now() / 1000);
    const slot = this.slotFor(second);
    const requests = await this.counters.httpRequests.get();
    for (const { labels, value } of requests.values) {
      const increase = this.increase(`r|${labels.method}|${labels.route}|${labels.status_code}|${labels.plan}`, value);
      add(slot.byStatus, statusClass(labels.status_code ?? '?'), increase);
      add(slot.byPlan, String(labels.plan ?? 'none'), increase);
    }
    const rejections = await this.counters.rejections.get();
    for (const { labels, value } of rejections.values) {
      add(slot.rejectionsByWindow, String(labels.window), this.increase(`x|${labels.plan}|${labels.window}`, value));
    }
    this.baselineTaken = true;
  }

  /** The seconds recorded within the last TRAFFIC_HISTORY_SECONDS, oldest first. */
  seconds(): TrafficSecond[] {
    const now = Math.floor(this.clock.now() / 1000);
    return this.ring
      .filter(
        (slot): slot is TrafficSecond =>
          slot !== undefined && slot.second > now - TRAFFIC_HISTORY_SECONDS && slot.second <= now,
      )
      .sort((a, b) => a.second - b.second);
  }

  private increase(series: string, value: number): number {
    const before = this.previous.get(series);
    this.previous.set(series, value);
    // The first sample is the baseline; a series that appears later counted from 0.
    if (before === undefined) return this.baselineTaken ? value : 0;
    return Math.max(0, value - before);
  }

  private slotFor(second: number): TrafficSecond {
    const index = second % TRAFFIC_HISTORY_SECONDS;
    let slot = this.ring[index];
    if (!slot || slot.second !== second) {
      slot = { second, byStatus: {}, byPlan: {}, rejectionsByWindow: {} };
      this.ring[index] = slot;
    }
    return slot;
  }
}
