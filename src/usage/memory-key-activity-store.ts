import { systemClock, type Clock } from '../shared/clock';
import { parseTouchedMember, touchedMember, type TouchedKeyDay, type UsagePeriodLedger } from './events/period-ledger';
import {
  USAGE_EXPORT_DAYS,
  type DayUsage,
  type KeyActivityStore,
  type KeyTally,
  type PeriodTally,
  type UsageDay,
} from './key-activity';

type DayCounts = Omit<KeyTally, 'lastUsedAt'>;

/** Held in process only: for tests of the recorder, and for a process with nowhere to write. */
export class MemoryKeyActivityStore implements KeyActivityStore, UsagePeriodLedger {
  readonly retriesAreSafe: boolean = true;
  /** `touchedMember` → its period counts (start → counts). */
  private readonly periods = new Map<string, Map<number, PeriodTally>>();
  /** `touchedMember` → mark. */
  private readonly marks = new Map<string, number>();

  constructor(private readonly clock: Clock = systemClock) {}
  /** key id → day → counts. */
  private readonly counts = new Map<string, Map<number, DayCounts>>();
  private readonly lastUses = new Map<string, number>();

  async add(day: number, tallies: ReadonlyMap<string, KeyTally>): Promise<void> {
    for (const [keyId, tally] of tallies) {
      let days = this.counts.get(keyId);
      if (!days) this.counts.set(keyId, (days = new Map()));
      const counts = days.get(day) ?? { admitted: 0, rateLimited: 0, banned: 0, units: 0, dayCount: 0 };
      counts.admitted += tally.admitted;
      counts.rateLimited += tally.rateLimited;
      counts.banned += tally.banned;
      counts.units += tally.units;
      counts.dayCount = Math.max(counts.dayCount, tally.dayCount);
      days.set(day, counts);
      for (const old of days.keys()) if (old <= day - USAGE_EXPORT_DAYS) days.delete(old);
      if (tally.lastUsedAt > (this.lastUses.get(keyId) ?? 0)) this.lastUses.set(keyId, tally.lastUsedAt);
      this.addPeriods(keyId, day, tally);
    }
  }

  private addPeriods(keyId: string, day: number, tally: KeyTally): void {
    if (!tally.periods || tally.periods.buckets.size === 0) return;
    const member = touchedMember(tally.periods.periodMs, day, keyId);
    let held = this.periods.get(member);
    if (!held) this.periods.set(member, (held = new Map()));
    for (const [start, p] of tally.periods.buckets) {
      const c = held.get(start) ?? { units: 0, dayCount: 0, admitted: 0, refused: 0 };
      held.set(start, {
        units: c.units + p.units,
        dayCount: Math.max(c.dayCount, p.dayCount),
        admitted: c.admitted + p.admitted,
        refused: c.refused + p.refused,
      });
    }
    this.marks.set(member, Math.max(this.marks.get(member) ?? 0, this.clock.now()));
  }

  async touched(max: number): Promise<TouchedKeyDay[]> {
    const entries = [...this.marks].sort((a, b) => a[1] - b[1]).slice(0, max);
    return entries.map(([member, mark]) => parseTouchedMember(member, mark)!);
  }

  async untouch(entry: TouchedKeyDay): Promise<void> {
    const member = touchedMember(entry.periodMs, entry.day, entry.keyId);
    if ((this.marks.get(member) ?? Infinity) <= entry.mark) this.marks.delete(member);
  }

  async periodsOf(keyId: string, periodMs: number, day: number): Promise<Map<number, PeriodTally>> {
    return new Map(
      [...(this.periods.get(touchedMember(periodMs, day, keyId)) ?? [])].map(([start, c]) => [start, { ...c }]),
    );
  }

  async days(keyId: string, firstDay: number, lastDay: number): Promise<Array<Omit<DayUsage, 'date'>>> {
    const days = this.counts.get(keyId);
    const result: Array<Omit<DayUsage, 'date'>> = [];
    for (let day = firstDay; day <= lastDay; day++) {
      const c = days?.get(day);
      result.push({ admitted: c?.admitted ?? 0, rateLimited: c?.rateLimited ?? 0, banned: c?.banned ?? 0 });
    }
    return result;
  }

  async lastUsed(keyIds: readonly string[]): Promise<Map<string, number>> {
    const result = new Map<string, number>();
    for (const id of keyIds) {
      const at = this.lastUses.get(id);
      if (at !== undefined) result.set(id, at);
    }
    return result;
  }

  async usageDays(keyIds: readonly string[], firstDay: number, lastDay: number): Promise<UsageDay[]> {
    const result: UsageDay[] = [];
    for (const keyId of keyIds) {
      const days = this.counts.get(keyId);
      if (!days) continue;
      for (const day of [...days.keys()].filter((d) => d >= firstDay && d <= lastDay).sort((a, b) => a - b))
        result.push({ keyId, day, ...days.get(day)! });
    }
    return result;
  }
}
