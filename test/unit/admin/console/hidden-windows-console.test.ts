import { keyLimitsText, withKeptLimits } from '../../../../src/admin/console/public/format.js';

// The key page's limits (CONTRACT §4, hidden windows): what it shows, and what an edit of the
// minute and day keeps. A limits write replaces the key's whole limits, so the page must send back
// what its form does not edit, or saving a new minute limit would show a hidden window again.

test("new minute and day limits keep the key's month, concurrency limit and hidden windows", () => {
  const current = { perMinute: 5, perDay: 50, perMonth: 500, maxInFlight: 2, hiddenWindows: ['minute' as const] };
  expect(withKeptLimits(current, { perMinute: 6, perDay: 60 })).toEqual({
    perMinute: 6,
    perDay: 60,
    perMonth: 500,
    maxInFlight: 2,
    hiddenWindows: ['minute'],
  });
  expect(withKeptLimits({ perMinute: 5, perDay: 50, hiddenWindows: [] }, { perMinute: 6, perDay: 60 })).toEqual({
    perMinute: 6,
    perDay: 60,
    hiddenWindows: [],
  });
  expect(withKeptLimits({ perMinute: 5, perDay: 50 }, { perMinute: 6, perDay: 60 })).toEqual({
    perMinute: 6,
    perDay: 60,
  });
  // Emptied fields fall back to the plan's limits; a key without limits of its own takes the new ones as they are.
  expect(withKeptLimits(current, null)).toBeNull();
  expect(withKeptLimits(null, { perMinute: 6, perDay: 60 })).toEqual({ perMinute: 6, perDay: 60 });
});

test("a key's limits in a line name its hidden windows", () => {
  expect(keyLimitsText({ perMinute: 60, perDay: 1000, maxInFlight: 5, hiddenWindows: ['minute', 'day'] })).toBe(
    '60/min · 1,000/day · 5 at once · hidden: minute, day',
  );
  expect(keyLimitsText({ perMinute: 60, perDay: 1000, hiddenWindows: [] })).toBe('60/min · 1,000/day · hidden: none');
  expect(keyLimitsText({ perMinute: 60, perDay: 1000, perMonth: 20000 })).toBe('60/min · 1,000/day · 20,000/month');
  expect(keyLimitsText(null)).toBe('–');
});
