import { formatAudit, formatKey, formatKeyTable, formatUsage } from '../../../src/cli/format';
import { parseDurationSeconds } from '../../../src/cli/duration';

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
      {
        ...key,
        id: 'key_fedcba9876543210fedcba98',
        name: 'old',
        plan: 'enterprise',
        limits: { perMinute: 5000, perDay: 500000 },
        revokedAt: '2026-03-11T00:00:00.000Z',
      },
    ]);
    expect(table.split('\n')).toEqual([
      'ID                            NAME        PLAN        LIMITS                CREATED                   REVOKED                   EXPIRES  LAST USED',
      'key_0123456789abcdef01234567  shop front  free        60/min, 1000/day      2026-03-10T12:30:30.000Z  -                         -        -',
      'key_fedcba9876543210fedcba98  old         enterprise  5000/min, 500000/day  2026-03-10T12:30:30.000Z  2026-03-11T00:00:00.000Z  -        -',
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
      usage: {
        minute: { limit: 60, remaining: 58, reset: 1773145860 },
        day: { limit: 1000, remaining: 998, reset: 1773187200 },
      },
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

describe('formatUsage', () => {
  test('a table of days and a bar a day scaled to the busiest, admitted then refused', () => {
    const text = formatUsage({
      keyId: 'key_0123456789abcdef01234567',
      days: [
        { date: '2026-03-09', admitted: 0, rateLimited: 0, banned: 0 },
        { date: '2026-03-10', admitted: 30, rateLimited: 5, banned: 5 },
        { date: '2026-03-11', admitted: 10, rateLimited: 0, banned: 0 },
      ],
    });
    expect(text.split('\n')).toEqual([
      'usage of key_0123456789abcdef01234567 (UTC days)',
      'DATE        ADMITTED  RATE LIMITED  BANNED',
      '2026-03-09  0         0             0',
      '2026-03-10  30        5             5',
      '2026-03-11  10        0             0',
      '',
      '█ admitted  ░ refused  (longest bar = 40)',
      '03-09',
      `03-10 ${'█'.repeat(30)}${'░'.repeat(10)}`,
      `03-11 ${'█'.repeat(10)}`,
    ]);
  });
});

describe('formatAudit', () => {
  test('one line per entry, details as JSON', () => {
    expect(
      formatAudit([
        {
          at: '2026-03-10T12:30:30.000Z',
          action: 'rotate',
          keyId: 'key_0123456789abcdef01234567',
          details: { graceSeconds: 60 },
        },
        { at: '2026-03-10T12:00:00.000Z', action: 'unban', keyId: 'key_0123456789abcdef01234567', details: {} },
      ]).split('\n'),
    ).toEqual([
      'AT                        ACTION  KEY                           DETAILS',
      '2026-03-10T12:30:30.000Z  rotate  key_0123456789abcdef01234567  {"graceSeconds":60}',
      '2026-03-10T12:00:00.000Z  unban   key_0123456789abcdef01234567  -',
    ]);
    expect(formatAudit([])).toBe('no audit entries');
  });
});

describe('parseDurationSeconds', () => {
  test.each([
    ['90', 90],
    ['90s', 90],
    ['15m', 900],
    ['12h', 43_200],
    ['30d', 2_592_000],
    ['2w', 1_209_600],
  ])('%s is %d seconds', (text, seconds) => {
    expect(parseDurationSeconds(text)).toBe(seconds);
  });
  test.each(['', 'd', '1.5d', '-1d', '1y', '1 d 2h'])('%p is not a duration', (text) => {
    expect(parseDurationSeconds(text)).toBeNull();
  });
});
