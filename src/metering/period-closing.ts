import type { PeriodTally } from '../keys/activity/key-activity';
import type { UsageFigures } from './usage-event';

/**
 * What is due for a key's closed periods of one day, given what was sent of them before: pure, so
 * that every instance computes the same from the same ledger.
 *
 * Units: the day window counts a key's units; the ledger holds, per period, the units each instance
 * flushed and the highest count the window reported to a request decided in it. A killed instance's
 * unflushed units are lost from the first but reach the second through the key's next request
 * anywhere that day. So the day's count by the end of period p is C(p) = max(units flushed up to p,
 * highest count reported up to p), and the last closed period's C is the usage export's figure for
 * the day (key-activity.ts, usage-export.ts). Each period is owed what C rose by, and only ever more:
 * a late flush adds a correction to its own period, and nothing sent is taken back (sinks such as
 * Stripe take no negative values), so the sum sent through period p is max over q ≤ p of C(q) = C(p).
 */

/** What was sent of one period so far: the sums of its events, and how many revisions it had. */
export interface SentPeriod extends UsageFigures {
  revisions: number;
}

/** One revision due: the figures to add, and its number (0: the period's first event). */
export interface DuePeriod extends UsageFigures {
  start: number;
  revision: number;
}

/**
 * The revisions due for the periods that start before `closedBefore` minus a period (closed), oldest
 * first. A period with traffic gets its first revision even when all its figures are 0 (every
 * request refused): one event per key and period with traffic.
 */
export function duePeriods(ledger: ReadonlyMap<number, PeriodTally>, sent: ReadonlyMap<number, SentPeriod>, periodMs: number, closedBefore: number): DuePeriod[] {
  const starts = [...new Set([...ledger.keys(), ...sent.keys()])].filter((start) => start + periodMs <= closedBefore).sort((a, b) => a - b);
  const due: DuePeriod[] = [];
  let flushedUnits = 0;
  let highestCount = 0;
  let sentUnits = 0;
  for (const start of starts) {
    const counts = ledger.get(start) ?? { units: 0, dayCount: 0, admitted: 0, refused: 0 };
    const before = sent.get(start);
    flushedUnits += counts.units;
    highestCount = Math.max(highestCount, counts.dayCount);
    sentUnits += before?.units ?? 0;
    const units = Math.max(0, Math.max(flushedUnits, highestCount) - sentUnits);
    sentUnits += units;
    const admitted = Math.max(0, counts.admitted - (before?.admitted ?? 0));
    const refused = Math.max(0, counts.refused - (before?.refused ?? 0));
    const first = before === undefined && ledger.has(start);
    if (first || units > 0 || admitted > 0 || refused > 0) due.push({ start, revision: before?.revisions ?? 0, units, admitted, refused });
  }
  return due;
}

/** `sent` with the due revisions added. */
export function afterSending(sent: ReadonlyMap<number, SentPeriod>, due: readonly DuePeriod[]): Map<number, SentPeriod> {
  const next = new Map(sent);
  for (const d of due) {
    const before = next.get(d.start) ?? { units: 0, admitted: 0, refused: 0, revisions: 0 };
    next.set(d.start, { units: before.units + d.units, admitted: before.admitted + d.admitted, refused: before.refused + d.refused, revisions: before.revisions + 1 });
  }
  return next;
}
