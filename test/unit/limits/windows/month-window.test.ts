import { MonthBoundaries, isBillingDay, monthSpan } from '../../../../src/limits/windows/month-window';

describe('monthSpan', () => {
  it.each([
    [
      'a billing day already passed this month',
      Date.UTC(2026, 2, 15, 12),
      10,
      Date.UTC(2026, 2, 10),
      Date.UTC(2026, 3, 10),
    ],
    [
      'a billing day still ahead this month',
      Date.UTC(2026, 2, 15, 12),
      20,
      Date.UTC(2026, 1, 20),
      Date.UTC(2026, 2, 20),
    ],
    ['the billing day itself, at 00:00 UTC', Date.UTC(2026, 2, 20), 20, Date.UTC(2026, 2, 20), Date.UTC(2026, 3, 20)],
    [
      'the last millisecond before the billing day',
      Date.UTC(2026, 2, 20) - 1,
      20,
      Date.UTC(2026, 1, 20),
      Date.UTC(2026, 2, 20),
    ],
    ['across the new year (ahead)', Date.UTC(2027, 0, 5), 28, Date.UTC(2026, 11, 28), Date.UTC(2027, 0, 28)],
    ['across the new year (passed)', Date.UTC(2026, 11, 30), 28, Date.UTC(2026, 11, 28), Date.UTC(2027, 0, 28)],
    ['February, 28 days long', Date.UTC(2026, 1, 27), 28, Date.UTC(2026, 0, 28), Date.UTC(2026, 1, 28)],
    ['the default day', Date.UTC(2026, 1, 27), undefined, Date.UTC(2026, 1, 1), Date.UTC(2026, 2, 1)],
  ])('%s', (_name, now, day, start, end) => {
    expect(monthSpan(now, day)).toEqual({ start, end });
  });

  it('refuses billing days outside 1..28', () => {
    for (const day of [0, 29, 31, 1.5, -1]) expect(() => monthSpan(0, day)).toThrow(RangeError);
    expect(isBillingDay(28)).toBe(true);
    expect(isBillingDay('3')).toBe(false);
  });
});

describe('MonthBoundaries', () => {
  it('gives the month before, this month and the next month end, recomputed only when the clock leaves the month', () => {
    const months = new MonthBoundaries();
    const first = months.argv(Date.UTC(2026, 2, 15), 10);
    expect(first).toEqual(
      [Date.UTC(2026, 1, 10), Date.UTC(2026, 2, 10), Date.UTC(2026, 3, 10), Date.UTC(2026, 4, 10)].map(String),
    );
    expect(months.argv(Date.UTC(2026, 3, 9), 10)).toBe(first);
    expect(months.argv(Date.UTC(2026, 3, 10), 10)[1]).toBe(String(Date.UTC(2026, 3, 10)));
  });
});
