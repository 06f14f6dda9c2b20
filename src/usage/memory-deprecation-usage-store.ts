import { DAY_MS } from './key-activity';
import {
  byLatest,
  LOOKBACK_DAYS,
  MAX_CALLERS_PER_ROUTE,
  type CallTally,
  type DeprecatedCaller,
  type DeprecationUsageStore,
} from './deprecation-usage';

/** Calls of deprecated operations kept in this process (no Redis): one instance only. */
export class MemoryDeprecationUsageStore implements DeprecationUsageStore {
  /** route → day → keyId → count, and route → keyId → last call. */
  private readonly counts = new Map<string, Map<number, Map<string, number>>>();
  private readonly lastCalls = new Map<string, Map<string, number>>();

  async add(route: string, calls: ReadonlyMap<string, CallTally>, day: number): Promise<void> {
    let days = this.counts.get(route);
    if (!days) this.counts.set(route, (days = new Map()));
    let today = days.get(day);
    if (!today) days.set(day, (today = new Map()));
    let last = this.lastCalls.get(route);
    if (!last) this.lastCalls.set(route, (last = new Map()));
    for (const [keyId, call] of calls) {
      today.set(keyId, (today.get(keyId) ?? 0) + call.count);
      last.set(keyId, Math.max(last.get(keyId) ?? 0, call.lastCallAt));
    }
    for (const old of days.keys()) if (old <= day - LOOKBACK_DAYS) days.delete(old);
    if (last.size > MAX_CALLERS_PER_ROUTE) {
      const oldest = [...last.entries()].sort((a, b) => a[1] - b[1]).slice(0, last.size - MAX_CALLERS_PER_ROUTE);
      for (const [keyId] of oldest) last.delete(keyId);
    }
  }

  async callers(route: string, now: number): Promise<DeprecatedCaller[]> {
    const since = now - LOOKBACK_DAYS * DAY_MS;
    const firstDay = Math.floor(now / DAY_MS) - LOOKBACK_DAYS + 1;
    const days = this.counts.get(route) ?? new Map<number, Map<string, number>>();
    const result: DeprecatedCaller[] = [];
    for (const [keyId, lastCallAt] of this.lastCalls.get(route) ?? []) {
      if (lastCallAt < since) continue;
      let count = 0;
      for (const [day, perKey] of days) if (day >= firstDay) count += perKey.get(keyId) ?? 0;
      result.push({ keyId, count, lastCallAt });
    }
    return result.sort(byLatest);
  }
}
