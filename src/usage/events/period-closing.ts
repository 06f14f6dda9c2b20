import type { PeriodTally } from '../key-activity';
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
 * the day (key-activity.ts, usage-export.ts). What the closed periods are owed in all is C of the
 * last of them less what was sent of them; it goes to the earliest periods sent less than C had
 * reached by their end (a late flush: a correction of its own period, as a new revision). Nothing
 * sent is taken back (sinks such as Stripe take no negative values): units a late flush brings that
 * a later period's count already carried are not owed twice, and stay where they were sent.
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
export function duePeriods(
  ledger: ReadonlyMap<number, PeriodTally>,
  sent: ReadonlyMap<number, SentPeriod>,
  periodMs: number,
  closedBefore: number,
): DuePeriod[] {
  const starts = [...new Set([...ledger.keys(), ...sent.keys()])]
    .filter((start) => start + periodMs <= closedBefore)
    .sort((a, b) => a - b);
  const { counted, sentThrough } = runningSums(starts, ledger, sent);
  // What the day is still owed: the count by the last closed period, less all sent of the closed periods.
  let owed = starts.length === 0 ? 0 : Math.max(0, counted.at(-1)! - sentThrough.at(-1)!);
  let added = 0;
  const due: DuePeriod[] = [];
  starts.forEach((start, i) => {
    const counts = ledger.get(start) ?? { units: 0, dayCount: 0, admitted: 0, refused: 0 };
    const before = sent.get(start);
    // Placed in the earliest periods that were sent less than the count had reached by their end.
    const units = Math.max(0, Math.min(counted[i]! - sentThrough[i]! - added, owed));
    owed -= units;
    added += units;
    const admitted = Math.max(0, counts.admitted - (before?.admitted ?? 0));
    const refused = Math.max(0, counts.refused - (before?.refused ?? 0));
    const first = before === undefined && ledger.has(start);
    if (first || units > 0 || admitted > 0 || refused > 0)
      due.push({ start, revision: before?.revisions ?? 0, units, admitted, refused });
  });
  return due;
}

/** Per period (in `starts`' order): the day count C by its end, and the units sent up to and including it. */
function runningSums(
  starts: readonly number[],
  ledger: ReadonlyMap<number, PeriodTally>,
  sent: ReadonlyMap<number, SentPeriod>,
) {
  const counted: number[] = [];
  const sentThrough: number[] = [];
  let flushedUnits = 0;
  let highestCount = 0;
  let sentUnits = 0;
  for (const start of starts) {
    const counts = ledger.get(start);
    flushedUnits += counts?.units ?? 0;
    highestCount = Math.max(highestCount, counts?.dayCount ?? 0);
    sentUnits += sent.get(start)?.units ?? 0;
    counted.push(Math.max(flushedUnits, highestCount));
    sentThrough.push(sentUnits);
  }
  return { counted, sentThrough };
}

/** `sent` with the due revisions added. */
export function afterSending(
  sent: ReadonlyMap<number, SentPeriod>,
  due: readonly DuePeriod[],
): Map<number, SentPeriod> {
  const next = new Map(sent);
  for (const d of due) {
    const before = next.get(d.start) ?? { units: 0, admitted: 0, refused: 0, revisions: 0 };
    next.set(d.start, {
      units: before.units + d.units,
      admitted: before.admitted + d.admitted,
      refused: before.refused + d.refused,
      revisions: before.revisions + 1,
    });
  }
  return next;
}
