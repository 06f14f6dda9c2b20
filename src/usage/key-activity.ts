import { type Clock } from '../shared/clock';
import type { UsageBuffer, UsageRecorder } from './usage-recorder';

export const DAY_MS = 86_400_000;
/** How many UTC days of usage history GET /admin/keys/{id}/usage shows (CONTRACT §5). */
export const USAGE_HISTORY_DAYS = 90;
/** How many UTC days the usage export reaches back, units included (CONTRACT §5). */
export const USAGE_EXPORT_DAYS = 400;

/** What the limiter decided for one request of a key, as the usage history counts it. */
export type KeyOutcome = 'admitted' | 'rateLimited' | 'banned';

export interface KeyTally {
  admitted: number;
  rateLimited: number;
  banned: number;
  /** Epoch ms of the latest admitted request in the batch; 0 when none was admitted. */
  lastUsedAt: number;
  /** Units the key's day window counted for the requests of the batch (costs included). */
  units: number;
  /**
   * The highest count the key's day window reported in the batch (0: none). Counts only grow within
   * a day, so the highest ever stored is what the window had counted by then, whichever instance
   * saw it: a flush lost with a killed process is made good by any later one.
   */
  dayCount: number;
  /**
   * The same counts per usage-event period (src/usage/events), written in the same store write as the
   * day's: absent while `usageEvents` is off. Periods divide the UTC day, so each lies in one day.
   */
  periods?: PeriodTallies;
}

/** A key's counts in one usage-event period (CONTRACT §5, Usage events). */
export interface PeriodTally {
  units: number;
  /** The highest count the day window reported for a request decided in this period (0: none). */
  dayCount: number;
  admitted: number;
  /** Rate-limited and banned requests. */
  refused: number;
}

/** A key's period counts within one day: the period length, and each period's start (epoch ms) → counts. */
export interface PeriodTallies {
  periodMs: number;
  buckets: Map<number, PeriodTally>;
}

/** One key's UTC day in the usage export (CONTRACT §5): kept USAGE_EXPORT_DAYS. */
export interface UsageDay {
  keyId: string;
  /** Days since the epoch. */
  day: number;
  admitted: number;
  rateLimited: number;
  banned: number;
  units: number;
  dayCount: number;
}

export interface DayUsage {
  /** UTC day, `YYYY-MM-DD`. */
  date: string;
  admitted: number;
  rateLimited: number;
  banned: number;
}

/** Where usage is kept: Redis for every instance together, or this process alone. */
export interface KeyActivityStore {
  /**
   * True when `add` stores a batch whole or not at all, so a refused batch can be sent again without
   * counting anything twice (SQLite: one transaction). Redis runs one script per key: a failed batch
   * may be partly stored, so it is dropped rather than doubled.
   */
  readonly retriesAreSafe?: boolean;
  /** Adds a batch of tallies of UTC day `day` (days since the epoch). Counts add up; never set. */
  add(day: number, tallies: ReadonlyMap<string, KeyTally>): Promise<void>;
  /** Counts of days `firstDay`..`lastDay`, oldest first, zero-filled. */
  days(keyId: string, firstDay: number, lastDay: number): Promise<Array<Omit<DayUsage, 'date'>>>;
  /** Epoch ms of each key's latest admitted request; keys never used are absent. */
  lastUsed(keyIds: readonly string[]): Promise<Map<string, number>>;
  /** The days `firstDay`..`lastDay` of these keys that had traffic, by key (in the order given), then day. */
  usageDays(keyIds: readonly string[], firstDay: number, lastDay: number): Promise<UsageDay[]>;
}

function emptyTally(): KeyTally {
  return { admitted: 0, rateLimited: 0, banned: 0, lastUsedAt: 0, units: 0, dayCount: 0 };
}

/** The period bucket of `at` in a key's tally; null while usage events are off (periodMs 0). */
function bucketOf(tally: KeyTally, periodMs: number, at: number): PeriodTally | null {
  if (periodMs <= 0) return null;
  // A period length changed by a reload starts afresh: one length per tally.
  if (!tally.periods || tally.periods.periodMs !== periodMs) tally.periods = { periodMs, buckets: new Map() };
  const start = at - (at % periodMs);
  let bucket = tally.periods.buckets.get(start);
  if (!bucket) tally.periods.buckets.set(start, (bucket = { units: 0, dayCount: 0, admitted: 0, refused: 0 }));
  return bucket;
}

/** Adds `from`'s period counts into `into` (a refused batch kept for the next flush). */
function mergePeriods(into: KeyTally, from: PeriodTallies | undefined): void {
  if (!from) return;
  for (const [start, counts] of from.buckets) {
    const bucket = bucketOf(into, from.periodMs, start)!;
    bucket.units += counts.units;
    bucket.admitted += counts.admitted;
    bucket.refused += counts.refused;
    bucket.dayCount = Math.max(bucket.dayCount, counts.dayCount);
  }
}

/** A refused tally and the one gathered since, as one: counts add up, the later last use wins. */
function mergeTallies(current: KeyTally, refused: KeyTally): KeyTally {
  const merged: KeyTally = {
    admitted: current.admitted + refused.admitted,
    rateLimited: current.rateLimited + refused.rateLimited,
    banned: current.banned + refused.banned,
    lastUsedAt: Math.max(current.lastUsedAt, refused.lastUsedAt),
    units: current.units + refused.units,
    dayCount: Math.max(current.dayCount, refused.dayCount),
  };
  mergePeriods(merged, refused.periods);
  mergePeriods(merged, current.periods);
  return merged;
}

export function dayOf(epochMs: number): number {
  return Math.floor(epochMs / DAY_MS);
}

export function dateOf(day: number): string {
  return new Date(day * DAY_MS).toISOString().slice(0, 10);
}

/**
 * Each key's requests (admitted, rate-limited, banned), its last use and the units it took: the
 * usage history and the usage export's ledger. Tallies gather per UTC day in its buffer of the one
 * UsageRecorder, which writes them every few seconds and at shutdown; a batch the store refused is
 * sent again when the store's retries are safe (SQLite), else dropped and counted
 * (gateway_key_usage_dropped_total).
 */
export class KeyActivity {
  /** day → key id → tally. */
  private readonly buffer: UsageBuffer<number, KeyTally>;
  /** The usage-event period length counts of `day` are kept in (periodMsOn). */
  private periodOfDay: { day: number; periodMs: number } | null = null;

  constructor(
    private readonly recorder: UsageRecorder,
    private readonly store: KeyActivityStore,
    private readonly clock: Clock,
    /** The usage-event period in ms (config `usageEvents`, read per request; 0: off): the ledger then keeps period counts too. */
    private readonly usagePeriodMs: () => number = () => 0,
  ) {
    this.buffer = recorder.buffer({
      concern: 'keyActivity',
      empty: emptyTally,
      write: (day, tallies) => store.add(day, tallies),
      retriesAreSafe: () => store.retriesAreSafe === true,
      merge: mergeTallies,
      weight: (tally) => tally.admitted + tally.rateLimited + tally.banned,
    });
  }

  record(keyId: string, outcome: KeyOutcome): void {
    const now = this.clock.now();
    const tally = this.buffer.tally(dayOf(now), keyId);
    tally[outcome] += 1;
    if (outcome === 'admitted') tally.lastUsedAt = now;
    const bucket = bucketOf(tally, this.periodMsOn(dayOf(now)), now);
    if (bucket && outcome === 'admitted') bucket.admitted += 1;
    else if (bucket) bucket.refused += 1;
  }

  /**
   * The units an admitted request took of the key's day window, and the count the window reported
   * after it, on the day the limiter decided it (`decidedAt`, the store's clock): the usage
   * export's `units`.
   */
  recordUnits(keyId: string, units: number, dayCount: number, decidedAt: number): void {
    const tally = this.buffer.tally(dayOf(decidedAt), keyId);
    tally.units += units;
    if (dayCount > tally.dayCount) tally.dayCount = dayCount;
    const bucket = bucketOf(tally, this.periodMsOn(dayOf(decidedAt)), decidedAt);
    if (bucket) {
      bucket.units += units;
      if (dayCount > bucket.dayCount) bucket.dayCount = dayCount;
    }
  }

  /**
   * The period length for counts of `day`: a length changed by a reload takes effect on the next
   * UTC day, so a day is counted in one length and its events add up to its units (one length's
   * first period would carry the day count the other's periods were already sent). Off and on
   * take effect at once.
   */
  private periodMsOn(day: number): number {
    const wanted = this.usagePeriodMs();
    const held = this.periodOfDay;
    if (held !== null && held.day === day && held.periodMs !== 0 && wanted !== 0 && wanted !== held.periodMs)
      return held.periodMs;
    this.periodOfDay = { day, periodMs: wanted };
    return wanted;
  }

  /** Writes what has gathered (the recorder's one flush: every concern's buffer). */
  flush(): Promise<void> {
    return this.recorder.flush();
  }

  async usage(keyId: string, days: number): Promise<{ keyId: string; days: DayUsage[] }> {
    await this.flush();
    const lastDay = dayOf(this.clock.now());
    const firstDay = lastDay - days + 1;
    const counts = await this.store.days(keyId, firstDay, lastDay);
    return { keyId, days: counts.map((c, i) => ({ date: dateOf(firstDay + i), ...c })) };
  }

  async lastUsed(keyIds: readonly string[]): Promise<Map<string, number>> {
    await this.flush();
    return this.store.lastUsed(keyIds);
  }

  /** The export's days of these keys, as stored; the caller flushes once before its first batch. */
  usageDays(keyIds: readonly string[], firstDay: number, lastDay: number): Promise<UsageDay[]> {
    return this.store.usageDays(keyIds, firstDay, lastDay);
  }
}
