import { runCli } from '../../../src/cli/main';
import { formatKey } from '../../../src/cli/format';
import { hiddenWindowsFrom } from '../../../src/cli/hidden-window-flags';

/**
 * `--hidden-windows` of `keys create|update` and `consumers create|update` (CONTRACT §4, hidden
 * windows): parsed before the admin API is asked, so an ADMIN_URL nothing answers on is fine.
 */

async function run(...argv: string[]): Promise<{ code: number; out: string[]; err: string[] }> {
  const out: string[] = [];
  const err: string[] = [];
  const code = await runCli(
    argv,
    { ADMIN_URL: 'http://127.0.0.1:9', ADMIN_TOKEN: 'unused' },
    { out: (t) => out.push(t), err: (t) => err.push(t) },
  );
  return { code, out, err };
}

test('a comma-separated list in canonical order without repeats; none is the empty list', () => {
  expect(hiddenWindowsFrom('day, minute,day')).toEqual(['minute', 'day']);
  expect(hiddenWindowsFrom('none')).toEqual([]);
  expect(hiddenWindowsFrom(undefined)).toBeUndefined();
  expect(() => hiddenWindowsFrom('hour')).toThrow('--hidden-windows: unknown window "hour" (minute, day, month)');
  expect(() => hiddenWindowsFrom('')).toThrow(/needs none, or one or more of minute,day,month/);
});

test.each([
  [
    ['create', '--name', 'x', '--plan', 'free', '--hidden-windows', 'minute'],
    'error: --per-month, --max-in-flight and --hidden-windows need --per-minute and --per-day',
  ],
  [
    ['create', '--name', 'x', '--plan', 'free', '--per-minute', '1', '--per-day', '2', '--hidden-windows', 'hour'],
    'error: --hidden-windows: unknown window "hour" (minute, day, month)',
  ],
  [
    ['consumers', 'create', '--name', 'x', '--hidden-windows', 'minute'],
    'error: --hidden-windows needs --per-minute, --per-day or --per-month',
  ],
  [
    ['consumers', 'update', 'con_x', '--per-minute', '5', '--hidden-windows', 'week'],
    'error: --hidden-windows: unknown window "week" (minute, day, month)',
  ],
])('%j: exit 2 before any admin call', async (argv, line) => {
  const { code, out, err } = await run(...argv);
  expect({ code, out, first: err.join('\n').split('\n')[0] }).toEqual({ code: 2, out: [], first: line });
});

test('a key shows its hidden windows with its limits', () => {
  const key = { id: 'key_1', name: 'n', plan: 'free', createdAt: '2026-03-10T12:30:30.000Z', revokedAt: null };
  expect(formatKey({ ...key, limits: { perMinute: 5, perDay: 50, hiddenWindows: ['minute'] } })).toContain(
    'limits:     5/min, 50/day, hidden: minute',
  );
  expect(formatKey({ ...key, limits: { perMinute: 5, perDay: 50, hiddenWindows: [] } })).toContain(
    'limits:     5/min, 50/day, hidden: none',
  );
});
