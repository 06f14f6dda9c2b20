import { runCli } from '../../../src/cli/main';

/**
 * The CLI's argument handling in process: help and usage errors never reach the admin API, so an
 * ADMIN_URL nothing could answer on is fine here. test/integration/cli runs the real process.
 */

const unreachable = { ADMIN_URL: 'http://127.0.0.1:9', ADMIN_TOKEN: 'unused' };

async function run(...argv: string[]): Promise<{ code: number; out: string[]; err: string[] }> {
  const out: string[] = [];
  const err: string[] = [];
  const code = await runCli(argv, unreachable, { out: (t) => out.push(t), err: (t) => err.push(t) });
  return { code, out, err };
}

test.each(['create', 'list', 'show', 'update', 'revoke', 'unban'])(
  '%s --help and %s -h print its usage and exit 0',
  async (command) => {
    for (const flag of ['--help', '-h']) {
      const { code, out, err } = await run(command, flag);
      expect({ code, err }).toEqual({ code: 0, err: [] });
      expect(out.join('\n')).toMatch(new RegExp(`^usage: npm run keys -- ${command}\\b`));
    }
  },
);

test('--help wins over other arguments, even bad ones', async () => {
  const { code, out } = await run('create', '--bogus', 'stray', '--help');
  expect(code).toBe(0);
  expect(out.join('\n')).toMatch(/^usage: npm run keys -- create --name NAME --plan PLAN/);
});

test('the general help lists every command', async () => {
  const { code, out } = await run('help');
  expect(code).toBe(0);
  expect(out.join('\n').match(/^ {2}(create|list|show|update|revoke|unban) /gm)).toHaveLength(6);
});

test.each([
  [['nope'], 'error: unknown command "nope"'],
  [['__proto__'], 'error: unknown command "__proto__"'],
  [['toString'], 'error: unknown command "toString"'],
  [[], 'error: no command given'],
  [['create', '--name', 'x'], 'error: --plan is required'],
  [['create', '--plan', 'free'], 'error: --name is required'],
  [['create', '--name', 'x', '--plan', 'free', '--per-day', '10'], 'error: --per-minute and --per-day go together'],
  [
    ['create', '--name', 'x', '--plan', 'free', '--per-minute', '0', '--per-day', '10'],
    'error: --per-minute needs a positive whole number',
  ],
  [
    ['create', '--name', 'x', '--plan', 'free', '--per-minute', '10', '--per-day=-5'],
    'error: --per-day needs a positive whole number',
  ],
  // Without "=", node's parseArgs takes "-5" for an option and says so.
  [['create', '--name', 'x', '--plan', 'free', '--per-minute', '10', '--per-day', '-5'], /^error: .*'--per-day'/],
  [['list', 'extra'], 'error: expected no arguments'],
  [['show'], 'error: expected ID'],
  [['unban', 'a', 'b'], 'error: expected ID'],
  [
    ['update', 'key_x'],
    'error: nothing to update: give --name, --plan, limits, --clear-limits, an expiry, an access list or a consumer',
  ],
  [
    ['update', 'key_x', '--json'],
    'error: nothing to update: give --name, --plan, limits, --clear-limits, an expiry, an access list or a consumer',
  ],
  [
    ['update', 'key_x', '--clear-limits', '--per-minute', '1', '--per-day', '1'],
    'error: --clear-limits cannot go with --per-minute/--per-day',
  ],
] as Array<[string[], string | RegExp]>)(
  '%j: exit 2 with an error line on stderr and nothing on stdout',
  async (argv, firstLine) => {
    const { code, out, err } = await run(...argv);
    expect(code).toBe(2);
    expect(out).toEqual([]);
    const line = err.join('\n').split('\n')[0];
    if (typeof firstLine === 'string') expect(line).toBe(firstLine);
    else expect(line).toMatch(firstLine);
    expect(err.join('\n')).toMatch(/^usage: npm run keys -- /m);
  },
);

test('an unknown option names it', async () => {
  const { code, err } = await run('list', '--colour');
  expect(code).toBe(2);
  expect(err.join('\n')).toMatch(/^error: .*--colour/);
});
