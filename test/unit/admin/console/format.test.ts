import {
  daysUntil,
  describeDetails,
  fmtNumber,
  fmtRate,
  fmtTime,
  isoToLocal,
  keyState,
  limitsFrom,
  localToIso,
  messageOf,
  niceScale,
  orderedKeys,
  planChoices,
} from '../../../../src/admin/console/public/format.js';

// The console's pure helpers, run under Node: the browser runs the same file as an ES module.

const NOW = Date.parse('2026-03-01T12:00:00.000Z');

test('numbers in the locale, a missing one as a dash', () => {
  expect(fmtNumber(1234567)).toBe(new Intl.NumberFormat().format(1234567));
  expect(fmtNumber(null)).toBe('–');
  expect(fmtNumber(undefined)).toBe('–');
  expect(fmtNumber(0)).toBe('0');
});

test('rates with the digits that matter', () => {
  expect([fmtRate(12.4), fmtRate(1.25), fmtRate(0.125), fmtRate(0)]).toEqual(['12', '1.3', '0.13', '0.00']);
});

test('times: none as a dash, an instant in the local zone', () => {
  expect(fmtTime(null)).toBe('–');
  expect(fmtTime('')).toBe('–');
  expect(fmtTime('2026-03-01T12:00:00.000Z')).toContain('2026');
});

test("a key's state: revoked before expired before active", () => {
  expect(keyState({ revokedAt: '2026-01-01T00:00:00.000Z', expiresAt: '2026-02-01T00:00:00.000Z' }, NOW)).toBe(
    'revoked',
  );
  expect(keyState({ revokedAt: null, expiresAt: '2026-03-01T12:00:00.000Z' }, NOW)).toBe('expired');
  expect(keyState({ revokedAt: null, expiresAt: '2026-03-01T12:00:00.001Z' }, NOW)).toBe('active');
  expect(keyState({ revokedAt: null, expiresAt: null }, NOW)).toBe('active');
});

test('datetime-local values and instants convert both ways, empty as none', () => {
  expect(localToIso('')).toBeNull();
  expect(isoToLocal(null)).toBe('');
  const local = isoToLocal('2026-06-01T10:30:00.000Z');
  expect(local).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d$/);
  expect(localToIso(local)).toBe('2026-06-01T10:30:00.000Z');
});

test('limit fields: both empty is no override, else both as numbers', () => {
  expect(limitsFrom('', '')).toBeUndefined();
  expect(limitsFrom('500', '5000')).toEqual({ perMinute: 500, perDay: 5000 });
});

test('chart scales: steps of 1, 2 or 5 × 10^n, whole steps for counts, a floor for empty charts', () => {
  expect(niceScale(0)).toEqual({ max: 1, step: 0.25 });
  expect(niceScale(0, true)).toEqual({ max: 4, step: 1 });
  expect(niceScale(7)).toEqual({ max: 8, step: 2 });
  expect(niceScale(1234)).toEqual({ max: 1500, step: 500 });
  expect(niceScale(0.3, true)).toEqual({ max: 1, step: 1 });
  const rates = niceScale(0.3);
  expect([rates.max, rates.step]).toEqual([expect.closeTo(0.3, 10), expect.closeTo(0.1, 10)]);
});

test('ordered series: the known names first in their order, then the others sorted; all known ones when asked', () => {
  expect(orderedKeys({ zeta: 1, pro: 2, alpha: 3, free: 4 }, ['free', 'pro', 'business'])).toEqual([
    'free',
    'pro',
    'alpha',
    'zeta',
  ]);
  expect(orderedKeys({ ban: 1 }, ['minute', 'day', 'ban'], true)).toEqual(['minute', 'day', 'ban']);
});

test("plan choices: the server's plans in its order, then others keys are on, each once", () => {
  expect(planChoices(['free', 'pro', 'trial'], ['pro', 'legacy', 'legacy'])).toEqual([
    'free',
    'pro',
    'trial',
    'legacy',
  ]);
  expect(planChoices([])).toEqual([]);
});

test('days to a sunset, rounded up, zero or less once past', () => {
  expect(daysUntil('2026-03-02T12:00:00.000Z', NOW)).toBe(1);
  expect(daysUntil('2026-03-02T12:00:00.001Z', NOW)).toBe(2);
  expect(daysUntil('2026-02-28T12:00:00.000Z', NOW)).toBe(-1);
});

test("an audit entry's details in a line: limits as rates, null as none, nothing as a dash", () => {
  expect(describeDetails({ plan: 'pro', limits: { perMinute: 300, perDay: 10000 } })).toBe(
    `plan: pro · limits: 300/min, ${fmtNumber(10000)}/day`,
  );
  expect(describeDetails({ limits: null, graceSeconds: 60 })).toBe('limits: none · graceSeconds: 60');
  expect(describeDetails({ revokedAt: '2026-03-01T12:00:00.000Z' })).toBe(
    `revokedAt: ${fmtTime('2026-03-01T12:00:00.000Z')}`,
  );
  expect(describeDetails({ other: { a: 1 } })).toBe('other: {"a":1}');
  expect(describeDetails({})).toBe('–');
  expect(describeDetails(null)).toBe('–');
});

test('a failure as a sentence', () => {
  expect(messageOf(new Error('No key with id x.'))).toBe('No key with id x.');
  expect(messageOf('plain')).toBe('plain');
});
