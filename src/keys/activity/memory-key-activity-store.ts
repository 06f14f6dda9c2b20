import { USAGE_EXPORT_DAYS, type DayUsage, type KeyActivityStore, type KeyTally, type UsageDay } from './key-activity';

type DayCounts = Omit<KeyTally, 'lastUsedAt'>;

/** Held in process only: for tests of the recorder, and for a process with nowhere to write. */
export class MemoryKeyActivityStore implements KeyActivityStore {
  readonly retriesAreSafe: boolean = true;
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
    }
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
      for (const day of [...days.keys()].filter((d) => d >= firstDay && d <= lastDay).sort((a, b) => a - b)) result.push({ keyId, day, ...days.get(day)! });
    }
    return result;
  }
}
