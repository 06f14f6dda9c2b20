import { afterSending, duePeriods, type SentPeriod } from '../../../../src/usage/events/period-closing';
import type { PeriodTally } from '../../../../src/usage/key-activity';

const P = 60_000;
const DAY0 = Date.UTC(2026, 2, 10);
const at = (i: number) => DAY0 + i * P;
const tally = (units: number, dayCount: number, admitted = 1, refused = 0): PeriodTally => ({
  units,
  dayCount,
  admitted,
  refused,
});
const unitsOf = (sent: Map<number, SentPeriod>) => [...sent.values()].reduce((sum, p) => sum + p.units, 0);

test('each closed period is owed what the day count rose by in it; open periods wait', () => {
  const ledger = new Map([
    [at(0), tally(3, 3)],
    [at(1), tally(4, 7)],
    [at(2), tally(2, 9)],
  ]);
  // Period 2 ends at at(3): not closed before it.
  expect(duePeriods(ledger, new Map(), P, at(3) - 1)).toEqual([
    { start: at(0), revision: 0, units: 3, admitted: 1, refused: 0 },
    { start: at(1), revision: 0, units: 4, admitted: 1, refused: 0 },
  ]);
});

test("a killed instance's lost units reach the period of the next request that reported the window's count", () => {
  // Period 1's 5 units were never flushed (the instance died); period 2's request saw the count at 9.
  const ledger = new Map([
    [at(0), tally(3, 3)],
    [at(1), tally(0, 0, 0)],
    [at(2), tally(1, 9)],
  ]);
  const due = duePeriods(ledger, new Map(), P, at(3));
  expect(due.map((d) => d.units)).toEqual([3, 0, 6]);
  expect(unitsOf(afterSending(new Map(), due))).toBe(9);
});

test('a late flush the day count already carried adds no unit twice; nothing sent is taken back', () => {
  const first = new Map([
    [at(0), tally(3, 3)],
    [at(1), tally(1, 9)],
  ]);
  const sent = afterSending(new Map(), duePeriods(first, new Map(), P, at(2)));
  expect(unitsOf(sent)).toBe(9);
  // Period 0's other instance flushes 5 units late (its requests took the count from 3 to 8).
  const late = new Map([
    [at(0), tally(8, 8, 3)],
    [at(1), tally(1, 9)],
  ]);
  const due = duePeriods(late, sent, P, at(2));
  // The count period 1 reported (9) already carried them: period 0's revision 1 adds its requests,
  // no unit (period 1 keeps the 6 it was sent: no negative event).
  expect(due).toEqual([{ start: at(0), revision: 1, units: 0, admitted: 2, refused: 0 }]);
  const after = afterSending(sent, due);
  expect(unitsOf(after)).toBe(9);
  // Nothing new: nothing due, however often asked.
  expect(duePeriods(late, after, P, at(2))).toEqual([]);
});

test('a late flush beyond the day count so far is a correction of its own period, with the difference', () => {
  const sent = afterSending(
    new Map(),
    duePeriods(
      new Map([
        [at(0), tally(3, 3)],
        [at(1), tally(1, 4)],
      ]),
      new Map(),
      P,
      at(2),
    ),
  );
  // Another instance's 5 units of period 0 (the count went 4 → 9 by its requests, never reported by a flushed one).
  const due = duePeriods(
    new Map([
      [at(0), tally(8, 3, 2)],
      [at(1), tally(1, 4)],
    ]),
    sent,
    P,
    at(2),
  );
  expect(due).toEqual([{ start: at(0), revision: 1, units: 5, admitted: 1, refused: 0 }]);
  expect(unitsOf(afterSending(sent, due))).toBe(9);
});

test('the units sent for a day equal max(units flushed, highest count) whatever order the flushes came in', () => {
  let sent = new Map<number, SentPeriod>();
  const ledger = new Map<number, PeriodTally>();
  const flushes: Array<[number, PeriodTally]> = [
    [0, tally(2, 2)],
    [2, tally(1, 6)],
    [1, tally(3, 5)],
    [3, tally(0, 0, 0, 4)],
    [0, tally(1, 0)],
  ];
  for (const [i, t] of flushes) {
    const held = ledger.get(at(i)) ?? tally(0, 0, 0);
    ledger.set(at(i), {
      units: held.units + t.units,
      dayCount: Math.max(held.dayCount, t.dayCount),
      admitted: held.admitted + t.admitted,
      refused: held.refused + t.refused,
    });
    sent = afterSending(sent, duePeriods(ledger, sent, P, at(4)));
  }
  const flushed = [...ledger.values()].reduce((s, t) => s + t.units, 0);
  const highest = Math.max(...[...ledger.values()].map((t) => t.dayCount));
  expect(unitsOf(sent)).toBe(Math.max(flushed, highest));
  expect([...sent.values()].reduce((s, p) => s + p.refused, 0)).toBe(4);
});
