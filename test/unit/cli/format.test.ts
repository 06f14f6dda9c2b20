import { formatKey, formatKeyTable } from '../../../src/cli/format';

/** What the key CLI prints for a person: aligned tables and `field: value` lines, never a key. */

const key = {
  id: 'key_0123456789abcdef01234567',
  name: 'shop front',
  plan: 'free',
  limits: { perMinute: 60, perDay: 1000 },
  createdAt: '2026-03-10T12:30:30.000Z',
  revokedAt: null,
};

describe('formatKeyTable', () => {
  test('a header and one aligned row a key; revoked keys show when', () => {
    const table = formatKeyTable([
      key,
      { ...key, id: 'key_fedcba9876543210fedcba98', name: 'old', plan: 'enterprise', limits: { perMinute: 5000, perDay: 500000 }, revokedAt: '2026-03-11T00:00:00.000Z' },
    ]);
    expect(table.split('\n')).toEqual([
      'ID                            NAME        PLAN        LIMITS                CREATED                   REVOKED',
      'key_0123456789abcdef01234567  shop front  free        60/min, 1000/day      2026-03-10T12:30:30.000Z  -',
      'key_fedcba9876543210fedcba98  old         enterprise  5000/min, 500000/day  2026-03-10T12:30:30.000Z  2026-03-11T00:00:00.000Z',
    ]);
  });

  test('no keys', () => {
    expect(formatKeyTable([])).toBe('no keys');
  });

  test('no trailing spaces', () => {
    for (const line of formatKeyTable([key]).split('\n')) expect(line).toBe(line.trimEnd());
  });

  test('a field it was not given (such as a key) is never printed', () => {
    const text = formatKeyTable([{ ...key, key: 'asg_dev_SHOULDNOTAPPEAR0000000000000000' }]);
    expect(text).not.toContain('SHOULDNOTAPPEAR');
  });
});

describe('formatKey', () => {
  test('a listed key', () => {
    expect(formatKey(key)).toBe(
      [
        'id:         key_0123456789abcdef01234567',
        'name:       shop front',
        'plan:       free',
        'limits:     60/min, 1000/day',
        'created:    2026-03-10T12:30:30.000Z',
        'revoked:    -',
      ].join('\n'),
    );
  });

  test('a shown key with usage and a ban', () => {
    const text = formatKey({
      ...key,
      usage: { minute: { limit: 60, remaining: 58, reset: 1773145860 }, day: { limit: 1000, remaining: 998, reset: 1773187200 } },
      bannedUntil: '2026-03-10T12:45:30.000Z',
    });
    expect(text.split('\n').slice(-3)).toEqual([
      'minute:     58 of 60 left, resets 2026-03-10T12:31:00.000Z',
      'day:        998 of 1000 left, resets 2026-03-11T00:00:00.000Z',
      'banned:     until 2026-03-10T12:45:30.000Z',
    ]);
  });

  test('not banned reads "no"; a key without limits reads "-"', () => {
    expect(formatKey({ ...key, limits: null, bannedUntil: null })).toMatch(/^limits: +-$[\s\S]*^banned: +no$/m);
  });

  test('a created key (no revokedAt field) has no revoked line', () => {
    const { revokedAt: _revokedAt, ...created } = key;
    expect(formatKey(created)).not.toContain('revoked');
  });
});
