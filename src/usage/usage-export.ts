import type { Clock } from '../shared/clock';
import { dateOf, dayOf, type UsageDay } from './key-activity';

/** Keys read together: one batch of store reads, and what the export holds in memory at once. */
export const EXPORT_BATCH_KEYS = 50;

/** One line of GET /admin/usage/export (CONTRACT §5). */
export interface UsageExportLine {
  date: string;
  keyId: string;
  consumerId: string | null;
  admitted: number;
  units: number;
  rateLimited: number;
  banned: number;
}

export interface UsageExportSources {
  /** Every key record (a key's days outlive its revocation); consumerId once consumers exist. */
  keys(): Promise<ReadonlyArray<{ id: string; consumerId?: string | null }>>;
  /** The usage history (KeyActivity): flushed once, then read in batches. */
  history: {
    flush(): Promise<void>;
    usageDays(keyIds: readonly string[], firstDay: number, lastDay: number): Promise<UsageDay[]>;
  };
  /**
   * What the key's day window has counted today, read from the limiter (null when it cannot say):
   * today's units do not wait for, or depend on, any instance's flush.
   */
  unitsToday(keyId: string): Promise<number | null>;
  clock: Clock;
}

/**
 * The usage export's lines, one per key and UTC day with traffic, key by key (by id), each key's
 * days oldest first; streamed: it holds one batch of keys' days at a time. `units` is the most any
 * source knows the day window counted: the units added by every instance's flushes, the highest
 * count the window reported to any flushed request, and for today the window itself. Each is at
 * most what the window counted; together they are exact unless a process died with unflushed
 * counts and no later request of that key on that day was flushed (docs/keys-and-console.md).
 */
export async function* usageExportLines(
  sources: UsageExportSources,
  firstDay: number,
  lastDay: number,
): AsyncGenerator<string> {
  await sources.history.flush();
  const records = [...(await sources.keys())].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  const today = dayOf(sources.clock.now());
  const withToday = firstDay <= today && today <= lastDay;
  // Each day's date once, not once per line.
  const dates = Array.from({ length: lastDay - firstDay + 1 }, (_, i) => dateOf(firstDay + i));
  for (let start = 0; start < records.length; start += EXPORT_BATCH_KEYS) {
    const batch = records.slice(start, start + EXPORT_BATCH_KEYS);
    const ids = batch.map((r) => r.id);
    const [days, live] = await Promise.all([
      sources.history.usageDays(ids, firstDay, lastDay),
      withToday ? liveUnits(sources, ids) : null,
    ]);
    let text = '';
    for (const line of linesOf(batch, days, today, live, (day) => dates[day - firstDay]!))
      text += JSON.stringify(line) + '\n';
    if (text !== '') yield text;
  }
}

async function liveUnits(sources: UsageExportSources, ids: readonly string[]): Promise<Map<string, number>> {
  const counts = await Promise.all(ids.map((id) => sources.unitsToday(id).catch(() => null)));
  const live = new Map<string, number>();
  ids.forEach((id, i) => {
    if (counts[i]) live.set(id, counts[i]!);
  });
  return live;
}

/** The batch's lines: its keys in order, each key's stored days, today's added from the window when the history has none. */
function* linesOf(
  batch: ReadonlyArray<{ id: string; consumerId?: string | null }>,
  days: readonly UsageDay[],
  today: number,
  live: Map<string, number> | null,
  dateOfDay: (day: number) => string,
): Generator<UsageExportLine> {
  const byKey = new Map<string, UsageDay[]>();
  for (const day of days) {
    let list = byKey.get(day.keyId);
    if (!list) byKey.set(day.keyId, (list = []));
    list.push(day);
  }
  for (const record of batch) {
    const stored = byKey.get(record.id) ?? [];
    const liveToday = live?.get(record.id) ?? 0;
    if (liveToday > 0 && !stored.some((d) => d.day === today)) {
      stored.push({
        keyId: record.id,
        day: today,
        admitted: 0,
        rateLimited: 0,
        banned: 0,
        units: 0,
        dayCount: liveToday,
      });
    }
    stored.sort((a, b) => a.day - b.day);
    for (const d of stored) {
      const units = Math.max(d.units, d.dayCount, d.day === today ? liveToday : 0);
      if (d.admitted + d.rateLimited + d.banned + units === 0) continue;
      yield {
        date: dateOfDay(d.day),
        keyId: record.id,
        consumerId: record.consumerId ?? null,
        admitted: d.admitted,
        units,
        rateLimited: d.rateLimited,
        banned: d.banned,
      };
    }
  }
}
