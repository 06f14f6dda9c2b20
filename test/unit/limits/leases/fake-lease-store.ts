import type { Clock } from '../../../../src/shared/clock';
import type { LeaseReturn, LeaseWindow } from '../../../../src/limits/leases/lease';
import { grantedLeaseUnits } from '../../../../src/limits/leases/lease-size';
import type { LeasedDecision, LeaseStore } from '../../../../src/limits/leases/lease-store';
import type { ConsumeOptions, KeyDecision, KeyRef, WindowLimits } from '../../../../src/limits/types';

/**
 * A store of one key's fixed minute and day, in memory, on a clock: what the Redis lease script does
 * (decide, grant by grantedLeaseUnits' rule, count request and lease, give back to a window still
 * the same), with its round trips counted and an outage to switch on. Minute and day only: the Redis
 * script itself is tested on a real Redis (test/integration/leases).
 */
export class FakeLeaseStore implements LeaseStore {
  minute = { start: 0, count: 0 };
  day = { start: 0, count: 0 };
  roundTrips = 0;
  refusals = 0;
  down = false;
  /** Units each window admitted for requests (the invariant's side: never over the limit with leases out). */
  wantedAsked: number[] = [];

  constructor(private readonly clock: Clock) {}

  private roll(): void {
    const now = this.clock.now();
    const minuteStart = Math.floor(now / 60_000) * 60_000;
    const dayStart = Math.floor(now / 86_400_000) * 86_400_000;
    if (this.minute.start !== minuteStart) this.minute = { start: minuteStart, count: 0 };
    if (this.day.start !== dayStart) this.day = { start: dayStart, count: 0 };
  }

  private trip(): void {
    this.roundTrips++;
    if (this.down) throw new Error('store down');
  }

  private decide(limits: WindowLimits, cost: number): KeyDecision {
    const now = this.clock.now();
    const room = this.minute.count + cost <= limits.perMinute && this.day.count + cost <= limits.perDay;
    if (room) {
      this.minute.count += cost;
      this.day.count += cost;
    } else this.refusals++;
    const windows = {
      minute: {
        limit: limits.perMinute,
        remaining: limits.perMinute - this.minute.count,
        resetAt: this.minute.start + 60_000,
      },
      day: { limit: limits.perDay, remaining: limits.perDay - this.day.count, resetAt: this.day.start + 86_400_000 },
      now,
    };
    if (room) return { outcome: 'allowed', ...windows };
    return { outcome: 'limited', refusedBy: 'minute', retryAfterMs: 1000, bannedNow: false, ...windows };
  }

  private giveBack(ret: LeaseReturn): boolean {
    let all = true;
    for (const w of ret.windows) {
      const window = w.name === 'minute' ? this.minute : this.day;
      if (window.start === w.startAt) window.count -= ret.units;
      else all = false;
    }
    return all;
  }

  async consume(_key: KeyRef, limits: WindowLimits, options?: ConsumeOptions): Promise<KeyDecision> {
    this.trip();
    this.roll();
    return this.decide(limits, options?.cost ?? 1);
  }

  async consumeWithLease(
    _key: KeyRef,
    limits: WindowLimits,
    options: ConsumeOptions | undefined,
    wanted: number,
    ended: LeaseReturn | null,
  ): Promise<LeasedDecision> {
    this.trip();
    this.roll();
    this.wantedAsked.push(wanted);
    const returned = ended === null ? undefined : this.giveBack(ended);
    const cost = options?.cost ?? 1;
    const decision = this.decide(limits, cost);
    if (decision.outcome !== 'allowed' || wanted <= 0) return { decision, grant: null, returned };
    const left = [limits.perMinute - this.minute.count, limits.perDay - this.day.count];
    const units = grantedLeaseUnits(wanted, left, cost);
    if (units === 0) return { decision, grant: null, returned };
    this.minute.count += units;
    this.day.count += units;
    const windows: LeaseWindow[] = [
      {
        name: 'minute',
        limit: limits.perMinute,
        remaining: limits.perMinute - this.minute.count,
        startAt: this.minute.start,
        resetAt: this.minute.start + 60_000,
      },
      {
        name: 'day',
        limit: limits.perDay,
        remaining: limits.perDay - this.day.count,
        startAt: this.day.start,
        resetAt: this.day.start + 86_400_000,
      },
    ];
    decision.minute.remaining -= units;
    decision.day.remaining -= units;
    return { decision, grant: { units, windows, storeNow: decision.now }, returned };
  }

  async returnUnits(returns: readonly LeaseReturn[]): Promise<boolean[]> {
    this.trip();
    this.roll();
    return returns.map((r) => this.giveBack(r));
  }

  async usage(_key: KeyRef, limits: WindowLimits) {
    this.roll();
    return {
      minute: {
        limit: limits.perMinute,
        remaining: limits.perMinute - this.minute.count,
        resetAt: this.minute.start + 60_000,
      },
      day: { limit: limits.perDay, remaining: limits.perDay - this.day.count, resetAt: this.day.start + 86_400_000 },
      bannedUntil: null,
    };
  }

  async consumerUsage() {
    return {};
  }
  async addCredits() {}
  async addConsumerCredits() {}
  async unban() {}
  async resetWindows() {
    this.minute.count = 0;
    return {};
  }
  async resetConsumerWindows() {
    return {};
  }
  async moveWindows() {}
  release() {}
  async activeBans() {
    return 0;
  }
  async close() {}
}
