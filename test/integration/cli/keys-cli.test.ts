import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import request from 'supertest';
import { ManualClock } from '../../../src/shared/clock';
import { freePort } from '../../support/redis-server';
import { startTestProduct, type ProductHarness } from '../../support/product-harness';
import {} from '../admin/admin-kit';
import { expectNoStackTrace, runKeys, type CliRun } from './cli-kit';
import { eventually } from '../../support/eventually';

/**
 * `npm run keys -- …` as a child process against a running admin listener: what each command
 * prints, what it changes, and its exit code (0 done, 1 the admin API refused or is unreachable,
 * 2 a usage error).
 */

let product: ProductHarness;
let clock: ManualClock;
let cliEnv: Record<string, string>;

beforeAll(async () => {
  // A held clock: the ban test hammers a key without a minute turning over under it.
  clock = new ManualClock(Date.UTC(2026, 2, 10, 12, 30, 30));
  product = await startTestProduct({
    clock,
    overrides: { ban: { threshold: 2, windowSeconds: 60, durationSeconds: 900 } },
  });
  cliEnv = { ADMIN_URL: product.adminUrl, ADMIN_TOKEN: product.adminToken };
});

afterAll(async () => {
  await product.close();
});

const KEY_PATTERN = /asg_dev_[0-9A-Za-z]{22,}/g;

function keys(...args: string[]): Promise<CliRun> {
  return runKeys(args, cliEnv);
}

/** Exit 0, nothing on stderr. */
function expectSuccess(run: CliRun): void {
  expect({ code: run.code, stderr: run.stderr }).toEqual({ code: 0, stderr: '' });
}

/** The exit code, nothing on stdout, and one `error:` line first on stderr. */
function expectFailure(run: CliRun, code: 1 | 2, message: RegExp): void {
  expect({ code: run.code, stdout: run.stdout }).toEqual({ code, stdout: '' });
  const lines = run.stderr.trimEnd().split('\n');
  expect(lines[0]).toMatch(/^error: /);
  expect(lines[0]).toMatch(message);
  if (code === 1) expect(lines).toHaveLength(1);
  expectNoStackTrace(run);
}

async function createJson(
  ...args: string[]
): Promise<{ id: string; key: string; name: string; plan: string; limits: unknown }> {
  const run = await keys('create', ...args, '--json');
  expectSuccess(run);
  return JSON.parse(run.stdout) as { id: string; key: string; name: string; plan: string; limits: unknown };
}

async function showJson(id: string): Promise<Record<string, unknown>> {
  const run = await keys('show', id, '--json');
  expectSuccess(run);
  return JSON.parse(run.stdout) as Record<string, unknown>;
}

function gateway(key: string): request.Test {
  return request(product.gatewayUrl).get('/v1/pets').set('Authorization', `Bearer ${key}`);
}

describe('create', () => {
  test('prints the key once, with its id, plan and limits; the key works at the gateway', async () => {
    const run = await keys('create', '--name', 'cli shop', '--plan', 'free');
    expectSuccess(run);
    const shown = run.stdout.match(KEY_PATTERN) ?? [];
    expect(shown).toHaveLength(1);
    expect(run.stdout).toMatch(/^id: +key_[0-9a-f]{24}$/m);
    expect(run.stdout).toMatch(/^name: +cli shop$/m);
    expect(run.stdout).toMatch(/^plan: +free$/m);
    expect(run.stdout).toMatch(/^limits: +60\/min, 1000\/day$/m);
    expect(run.stdout).toMatch(/shown once/);
    await gateway(shown[0]!).expect(200);
  });

  test('--json prints the admin API answer as JSON', async () => {
    const created = await createJson('--name', 'scripted', '--plan', 'pro');
    expect(created).toEqual({
      id: expect.stringMatching(/^key_[0-9a-f]{24}$/),
      key: expect.stringMatching(/^asg_dev_[0-9A-Za-z]{22,}$/),
      name: 'scripted',
      plan: 'pro',
      limits: { perMinute: 300, perDay: 10000 },
      createdAt: expect.any(String),
      expiresAt: null,
      consumerId: null,
      allowedOperations: null,
      allowedAddresses: null,
    });
    await gateway(created.key).expect(200);
  });

  test("--per-minute and --per-day set the key's own limits, as enterprise needs", async () => {
    const created = await createJson(
      '--name',
      'big',
      '--plan',
      'enterprise',
      '--per-minute',
      '5000',
      '--per-day',
      '500000',
    );
    expect(created).toEqual(
      expect.objectContaining({ plan: 'enterprise', limits: { perMinute: 5000, perDay: 500000 } }),
    );
  });
});

describe('list', () => {
  test('a table of keys, never the keys themselves or their hashes', async () => {
    const created = await createJson('--name', 'listed', '--plan', 'business');
    const run = await keys('list');
    expectSuccess(run);
    const [header, ...rows] = run.stdout.trimEnd().split('\n');
    expect(header).toMatch(/^ID +NAME +PLAN +LIMITS +CREATED +REVOKED +EXPIRES +LAST USED$/);
    expect(rows.find((row) => row.startsWith(created.id))).toMatch(
      new RegExp(`^${created.id} +listed +business +1000/min, 100000/day +\\S+ +- +- +-$`),
    );
    expect(run.stdout).not.toMatch(KEY_PATTERN);
  });

  test('--json: an array of keys without key or hash fields', async () => {
    const created = await createJson('--name', 'listed as json', '--plan', 'free');
    const run = await keys('list', '--json');
    expectSuccess(run);
    expect(run.stdout).not.toContain(created.key);
    const items = JSON.parse(run.stdout) as Array<Record<string, unknown>>;
    expect(items.find((k) => k.id === created.id)).toEqual({
      id: created.id,
      name: 'listed as json',
      plan: 'free',
      limits: { perMinute: 60, perDay: 1000 },
      createdAt: expect.any(String),
      revokedAt: null,
      expiresAt: null,
      consumerId: null,
      allowedOperations: null,
      allowedAddresses: null,
      lastUsedAt: null,
    });
  });
});

describe('show', () => {
  test('the key with its live usage and ban state', async () => {
    const created = await createJson('--name', 'shown', '--plan', 'free', '--per-minute', '5', '--per-day', '50');
    await gateway(created.key).expect(200);
    const run = await keys('show', created.id);
    expectSuccess(run);
    expect(run.stdout).toMatch(new RegExp(`^id: +${created.id}$`, 'm'));
    expect(run.stdout).toMatch(/^minute: +4 of 5 left, resets \S+Z$/m);
    expect(run.stdout).toMatch(/^day: +49 of 50 left, resets \S+Z$/m);
    expect(run.stdout).toMatch(/^banned: +no$/m);
    expect(run.stdout).not.toContain(created.key);

    expect(await showJson(created.id)).toEqual(
      expect.objectContaining({
        id: created.id,
        usage: {
          minute: { limit: 5, remaining: 4, reset: expect.any(Number) },
          day: { limit: 50, remaining: 49, reset: expect.any(Number) },
        },
        bannedUntil: null,
      }),
    );
  });
});

describe('update', () => {
  test('--plan business: the new plan and its limits, applied at the gateway', async () => {
    const created = await createJson('--name', 'upgraded', '--plan', 'free');
    const run = await keys('update', created.id, '--plan', 'business');
    expectSuccess(run);
    expect(run.stdout).toMatch(/^plan: +business$/m);
    expect(run.stdout).toMatch(/^limits: +1000\/min, 100000\/day$/m);
    expect(await showJson(created.id)).toEqual(
      expect.objectContaining({ plan: 'business', limits: { perMinute: 1000, perDay: 100000 } }),
    );
    await eventually(
      async () => String((await gateway(created.key)).headers['ratelimit-policy']).startsWith('"minute";q=1000;'),
      { timeoutMs: 1000 },
    );
  });

  test("--per-minute/--per-day set limits; --clear-limits returns to the plan's", async () => {
    const created = await createJson('--name', 'tuned', '--plan', 'pro');
    const tuned = await keys('update', created.id, '--per-minute', '7', '--per-day', '70', '--json');
    expectSuccess(tuned);
    expect(JSON.parse(tuned.stdout)).toEqual(
      expect.objectContaining({ id: created.id, limits: { perMinute: 7, perDay: 70 } }),
    );
    const cleared = await keys('update', created.id, '--clear-limits');
    expectSuccess(cleared);
    expect(cleared.stdout).toMatch(/^limits: +300\/min, 10000\/day$/m);
  });

  test('--name renames', async () => {
    const created = await createJson('--name', 'old name', '--plan', 'free');
    expectSuccess(await keys('update', created.id, '--name', 'new name'));
    expect((await showJson(created.id)).name).toBe('new name');
  });
});

describe('revoke and unban', () => {
  test('revoke: the key is refused with revoked_api_key and listed as revoked', async () => {
    const created = await createJson('--name', 'doomed', '--plan', 'free');
    await gateway(created.key).expect(200);
    const run = await keys('revoke', created.id);
    expectSuccess(run);
    expect(run.stdout.trim()).toBe(`revoked ${created.id}`);
    await eventually(async () => (await gateway(created.key)).status === 401, { timeoutMs: 1000 });
    const res = await gateway(created.key);
    expect({ status: res.status, code: (res.body as { code?: string }).code }).toEqual({
      status: 401,
      code: 'revoked_api_key',
    });
    expect((await showJson(created.id)).revokedAt).toEqual(expect.any(String));
  });

  test('unban: show names the ban, unban lifts it', async () => {
    const created = await createJson('--name', 'hammered', '--plan', 'free', '--per-minute', '1', '--per-day', '100');
    let last = await gateway(created.key);
    for (let i = 0; i < 10 && (last.body as { code?: string }).code !== 'temporarily_banned'; i++)
      last = await gateway(created.key);
    expect((last.body as { code?: string }).code).toBe('temporarily_banned');

    const banned = await keys('show', created.id);
    expectSuccess(banned);
    expect(banned.stdout).toMatch(/^banned: +until \d{4}-\d\d-\d\dT\S+Z$/m);

    const run = await keys('unban', created.id);
    expectSuccess(run);
    expect(run.stdout.trim()).toBe(`ban lifted for ${created.id}`);
    expect((await showJson(created.id)).bannedUntil).toBeNull();
    expect((await gateway(created.key)).body).toEqual(expect.objectContaining({ code: 'rate_limited' }));
  });

  test('--json on revoke and unban', async () => {
    const created = await createJson('--name', 'scripted end', '--plan', 'free');
    const unban = await keys('unban', created.id, '--json');
    expectSuccess(unban);
    expect(JSON.parse(unban.stdout)).toEqual({ id: created.id, unbanned: true });
    const revoke = await keys('revoke', created.id, '--json');
    expectSuccess(revoke);
    expect(JSON.parse(revoke.stdout)).toEqual({ id: created.id, revoked: true });
  });
});

describe('expiry, rotate, usage and audit', () => {
  test('create --expires-in 30d and --expires-at; update --expires-at and --no-expiry', async () => {
    const before = Date.now();
    const created = (await createJson('--name', 'expiring', '--plan', 'free', '--expires-in', '30d')) as unknown as {
      id: string;
      expiresAt: string;
    };
    const expiresIn = Date.parse(created.expiresAt) - before;
    expect(expiresIn).toBeGreaterThanOrEqual(30 * 86_400_000);
    expect(expiresIn).toBeLessThan(30 * 86_400_000 + 60_000);

    const at = (await createJson(
      '--name',
      'fixed end',
      '--plan',
      'free',
      '--expires-at',
      '2031-01-31T17:00:00Z',
    )) as unknown as { id: string; expiresAt: string };
    expect(at.expiresAt).toBe('2031-01-31T17:00:00.000Z');

    const updated = await keys('update', at.id, '--expires-at', '2032-01-01T00:00:00+01:00');
    expectSuccess(updated);
    expect(updated.stdout).toMatch(/^expires: +2031-12-31T23:00:00.000Z$/m);
    const cleared = await keys('update', at.id, '--no-expiry', '--json');
    expectSuccess(cleared);
    expect((JSON.parse(cleared.stdout) as { expiresAt: unknown }).expiresAt).toBeNull();
  });

  test('rotate prints the new key once and until when the old one works; both work at the gateway', async () => {
    const created = await createJson('--name', 'rotated', '--plan', 'free');
    const run = await keys('rotate', created.id, '--grace', '2h');
    expectSuccess(run);
    const shown = run.stdout.match(KEY_PATTERN) ?? [];
    expect(shown).toHaveLength(1);
    expect(shown[0]).not.toBe(created.key);
    expect(run.stdout).toContain(`old secret works until ${new Date(clock.now() + 7_200_000).toISOString()}`);
    await gateway(created.key).expect(200);
    await gateway(shown[0]!).expect(200);

    const json = await keys('rotate', created.id, '--json');
    expectSuccess(json);
    expect(JSON.parse(json.stdout)).toEqual(
      expect.objectContaining({
        id: created.id,
        key: expect.stringMatching(KEY_PATTERN),
        previousKeyExpiresAt: new Date(clock.now() + 86_400_000).toISOString(),
      }),
    );
  });

  test('usage prints a table and a bar chart of the days; --json the admin API answer', async () => {
    const created = await createJson('--name', 'used', '--plan', 'free');
    for (let i = 0; i < 3; i++) await gateway(created.key).expect(200);
    const run = await keys('usage', created.id, '--days', '2');
    expectSuccess(run);
    const today = new Date(clock.now()).toISOString().slice(0, 10);
    expect(run.stdout).toMatch(new RegExp(`^${today} +3 +0 +0$`, 'm'));
    expect(run.stdout).toMatch(new RegExp(`^${today.slice(5)} ${'█'.repeat(40)}$`, 'm'));
    const json = await keys('usage', created.id, '--json');
    expectSuccess(json);
    expect((JSON.parse(json.stdout) as { days: unknown[] }).days).toHaveLength(30);
  });

  test('audit lists admin writes newest first; --limit bounds it', async () => {
    const created = await createJson('--name', 'audited', '--plan', 'free');
    expectSuccess(await keys('revoke', created.id));
    const run = await keys('audit', '--limit', '2');
    expectSuccess(run);
    const [header, ...rows] = run.stdout.trimEnd().split('\n');
    expect(header).toMatch(/^AT +ACTION +KEY +DETAILS$/);
    expect(rows).toHaveLength(2);
    expect(rows[0]).toMatch(new RegExp(`^\\S+ +revoke +${created.id} `));
    expect(rows[1]).toMatch(new RegExp(`^\\S+ +create +${created.id} `));
    expect(run.stdout).not.toContain(created.key);
  });

  test.each([
    [
      'rotate with a bad --grace',
      ['rotate', 'key_000000000000000000000000', '--grace', '1y'],
      /--grace needs a duration/,
    ],
    [
      'usage with a bad --days',
      ['usage', 'key_000000000000000000000000', '--days', '0'],
      /--days needs a positive whole number/,
    ],
    ['audit with a bad --limit', ['audit', '--limit', 'x'], /--limit needs a positive whole number/],
    [
      'both expiry flags',
      ['create', '--name', 'n', '--plan', 'free', '--expires-in', '1d', '--expires-at', '2031-01-01T00:00:00Z'],
      /not both/,
    ],
    [
      '--no-expiry with --expires-in',
      ['update', 'key_000000000000000000000000', '--no-expiry', '--expires-in', '1d'],
      /--no-expiry cannot go with/,
    ],
  ])('%s: exit 2', async (_what, args, message) => {
    expectFailure(await keys(...args), 2, message);
  });

  test.each([
    [
      'an expiry in the past',
      ['create', '--name', 'n', '--plan', 'free', '--expires-at', '2020-01-01T00:00:00Z'],
      /expiresAt must be in the future/,
    ],
    ['a grace over a week', ['rotate', 'key_000000000000000000000000', '--grace', '8d'], /graceSeconds/],
    [
      'usage beyond 90 days',
      ['usage', 'key_000000000000000000000000', '--days', '91'],
      /days must be an integer from 1 to 90/,
    ],
  ])("%s: exit 1 with the admin API's message", async (_what, args, message) => {
    expectFailure(await keys(...args), 1, message);
  });
});

describe("my-usage: a client's own view, with its API key and no admin token", () => {
  test('prints the plan, both windows, the ban and the expiry; --json is GET /v1/usage; nothing is counted', async () => {
    const created = (await createJson(
      '--name',
      'client',
      '--plan',
      'free',
      '--expires-at',
      '2031-01-31T17:00:00Z',
    )) as unknown as { id: string; key: string };
    await gateway(created.key).expect(200);
    const env = { GATEWAY_URL: product.gatewayUrl, API_KEY: created.key };
    const text = await runKeys(['my-usage'], env);
    expectSuccess(text);
    expect(text.stdout).toMatch(/^plan: +free$/m);
    expect(text.stdout).toMatch(/^minute +60 +59 +\d{4}-\d\d-\d\dT/m);
    expect(text.stdout).toMatch(/^day +1000 +999 +\d{4}-\d\d-\d\dT/m);
    expect(text.stdout).toMatch(/^banned: +no$/m);
    expect(text.stdout).toMatch(/^expires: +2031-01-31T17:00:00.000Z$/m);
    expect(text.stdout).not.toContain(created.key);

    const json = await runKeys(['my-usage', '--json'], env);
    expectSuccess(json);
    const answer = (
      await request(product.gatewayUrl).get('/v1/usage').set('Authorization', `Bearer ${created.key}`).expect(200)
    ).body as unknown;
    expect(JSON.parse(json.stdout)).toEqual(answer);
    // Three views of the usage later, the windows still show the one request through the gateway.
    expect((answer as { windows: Array<{ remaining: number }> }).windows.map((w) => w.remaining)).toEqual([59, 999]);
  });

  test("a revoked key: exit 1 with the gateway's message; no API_KEY: exit 1 saying so; a gateway nothing listens on: exit 1", async () => {
    const created = await createJson('--name', 'gone', '--plan', 'free');
    expectSuccess(await keys('revoke', created.id));
    const revoked = await runKeys(['my-usage'], { GATEWAY_URL: product.gatewayUrl, API_KEY: created.key });
    expectFailure(revoked, 1, /401 revoked_api_key/);
    expect(revoked.stderr).not.toContain(created.key);
    expectFailure(await runKeys(['my-usage'], { GATEWAY_URL: product.gatewayUrl }), 1, /API_KEY is not set/);
    const url = `http://127.0.0.1:${await freePort()}`;
    expectFailure(
      await runKeys(['my-usage'], { GATEWAY_URL: url, API_KEY: created.key }),
      1,
      new RegExp(`cannot reach the gateway at ${url} \\(ECONNREFUSED\\)`),
    );
  });
});

describe('exit 1: the admin API refused or cannot be reached', () => {
  test('an unknown id', async () => {
    expectFailure(
      await keys('show', 'key_000000000000000000000000'),
      1,
      /No key with id key_000000000000000000000000.*404 not_found/,
    );
    expectFailure(await keys('revoke', 'key_000000000000000000000000'), 1, /404 not_found/);
    expectFailure(await keys('unban', 'key_000000000000000000000000'), 1, /404 not_found/);
    expectFailure(await keys('update', 'key_000000000000000000000000', '--name', 'x'), 1, /404 not_found/);
  });

  test('a plan that does not exist', async () => {
    expectFailure(
      await keys('create', '--name', 'x', '--plan', 'gold'),
      1,
      /plan must be one of free, pro, business, enterprise.*400 validation_failed/,
    );
    expectFailure(
      await keys('create', '--name', 'x', '--plan', 'enterprise'),
      1,
      /must carry limits.*400 validation_failed/,
    );
  });

  test('a wrong admin token', async () => {
    const run = await runKeys(['list'], { ADMIN_URL: product.adminUrl, ADMIN_TOKEN: 'not-the-admin-token' });
    expectFailure(run, 1, /admin token is not valid.*401 invalid_api_key/);
    expect(run.stderr).not.toContain('not-the-admin-token');
  });

  test('an admin URL nothing listens on', async () => {
    const url = `http://127.0.0.1:${await freePort()}`;
    expectFailure(
      await runKeys(['list'], { ADMIN_URL: url, ADMIN_TOKEN: product.adminToken }),
      1,
      new RegExp(`cannot reach the admin API at ${url} \\(ECONNREFUSED\\)`),
    );
  });

  test('an ADMIN_URL that is not a URL', async () => {
    expectFailure(
      await runKeys(['list'], { ADMIN_URL: 'not a url', ADMIN_TOKEN: product.adminToken }),
      1,
      /ADMIN_URL is not a URL/,
    );
  });

  test('no ADMIN_TOKEN and no token file under DATA_DIR', async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'asg-cli-'));
    expectFailure(
      await runKeys(['list'], { ADMIN_URL: product.adminUrl, DATA_DIR: dataDir }),
      1,
      /ADMIN_TOKEN is not set/,
    );
  });
});

test('without ADMIN_TOKEN, the token npm start generated under DATA_DIR is used', async () => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'asg-cli-'));
  fs.writeFileSync(path.join(dataDir, 'admin-token'), product.adminToken + '\n');
  const run = await runKeys(['list', '--json'], { ADMIN_URL: product.adminUrl, DATA_DIR: dataDir });
  expectSuccess(run);
  expect(Array.isArray(JSON.parse(run.stdout))).toBe(true);
});

describe('exit 2: usage errors, and nothing is sent', () => {
  test.each([
    ['an unknown command', ['reroll'], /unknown command "reroll"/],
    ['a name from Object.prototype', ['constructor'], /unknown command "constructor"/],
    ['no command', [], /no command/],
    ['create without --name', ['create', '--plan', 'free'], /--name is required/],
    ['create without --plan', ['create', '--name', 'x'], /--plan is required/],
    ['a stray positional to create', ['create', 'extra', '--name', 'x', '--plan', 'free'], /expected no arguments/],
    ['a stray positional to list', ['list', 'extra'], /expected no arguments/],
    ['two ids to show', ['show', 'key_a', 'key_b'], /expected ID/],
    ['show without an id', ['show'], /expected ID/],
    ['revoke without an id', ['revoke'], /expected ID/],
    ['an unknown option', ['list', '--bogus'], /bogus/],
    [
      '--per-minute without --per-day',
      ['create', '--name', 'x', '--plan', 'free', '--per-minute', '5'],
      /--per-minute and --per-day go together/,
    ],
    [
      'a limit that is not a whole number',
      ['create', '--name', 'x', '--plan', 'free', '--per-minute', '5.5', '--per-day', '10'],
      /positive whole number/,
    ],
    ['update with nothing to change', ['update', 'key_000000000000000000000000'], /nothing to update/],
    [
      '--clear-limits with limits',
      ['update', 'key_000000000000000000000000', '--clear-limits', '--per-minute', '1', '--per-day', '2'],
      /cannot go with/,
    ],
    ['--name without a value', ['create', '--plan', 'free', '--name'], /--name/],
  ])('%s', async (_label, args, message) => {
    const before = (
      (await request(product.adminUrl).get('/admin/keys').set('Authorization', `Bearer ${product.adminToken}`))
        .body as unknown[]
    ).length;
    const run = await keys(...args);
    expectFailure(run, 2, message);
    expect(run.stderr).toMatch(/usage: npm run keys -- /);
    const after = (
      (await request(product.adminUrl).get('/admin/keys').set('Authorization', `Bearer ${product.adminToken}`))
        .body as unknown[]
    ).length;
    expect(after).toBe(before);
  });
});

describe('--help', () => {
  test.each(['create', 'list', 'show', 'update', 'revoke', 'unban'])(
    '%s --help: exit 0 with its usage line',
    async (command) => {
      const run = await runKeys([command, '--help'], {});
      expectSuccess(run);
      expect(run.stdout.split('\n')[0]).toMatch(new RegExp(`^usage: npm run keys -- ${command}\\b`));
    },
  );

  test.each([['--help'], ['help'], ['-h']])('%s alone: exit 0 with the command list', async (flag) => {
    const run = await runKeys([flag], {});
    expectSuccess(run);
    expect(run.stdout.split('\n')[0]).toBe('usage: npm run keys -- <command> [options]');
    for (const command of ['create', 'list', 'show', 'update', 'revoke', 'unban'])
      expect(run.stdout).toMatch(new RegExp(`^  ${command} `, 'm'));
  });
});

describe('month quotas and credits', () => {
  test('--per-month and --billing-day make a month window; credits adds to it; show prints it', async () => {
    const created = await createJson(
      '--name',
      'metered',
      '--plan',
      'enterprise',
      '--per-minute',
      '10',
      '--per-day',
      '100',
      '--per-month',
      '1000',
      '--billing-day',
      '15',
    );
    expect(created.limits).toEqual({ perMinute: 10, perDay: 100, perMonth: 1000 });
    await gateway(created.key).expect(200);

    const credited = await keys('credits', created.id, '--units', '25');
    expectSuccess(credited);
    // 10 March is before the 15th: this billing month ends on 15 March.
    expect(credited.stdout).toContain('month:      1024 of 1025 (25 credited) left, resets 2026-03-15T00:00:00.000Z');
    expect(credited.stdout).toContain('limits:     10/min, 100/day, 1000/month');
    expect(credited.stdout).toContain('billing:    day 15 of each month, 00:00 UTC');

    const shown = await keys('show', created.id);
    expectSuccess(shown);
    expect(shown.stdout).toContain('month:      1024 of 1025 (25 credited) left');

    const free = await createJson('--name', 'no month', '--plan', 'free');
    const refused = await keys('credits', free.id, '--units', '5');
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/no month window.*\(409 conflict\)/);
    const bad = await keys('credits', created.id, '--units', '0');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/^error: --units needs a whole number/);
  });
});

/**
 * Issue 42: the CLI printed terminal escape sequences from key names (an imported record, or a
 * name given to the admin API, may hold any character): a name could clear the screen, retitle
 * the window or hide text. Every control character (C0, DEL, C1) and every bidirectional override
 * reaches the terminal escaped, in the table, in one key, in the audit trail, in errors and in JSON.
 */
describe('control characters in what the admin API holds', () => {
  const HOSTILE = 'evil\u001b[2J\u001b]0;owned\u0007\u009b31m\u202eton\u0008\u007f\r\nFAKE  line';
  /** Anything a terminal acts on rather than prints; a newline only where the CLI's own layout puts one. */
  const CONTROL = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/;

  test('list, show, audit and --json print them escaped, never raw', async () => {
    const { record } = await product.keyService.create({ name: HOSTILE, plan: 'free' });
    await request(product.adminUrl)
      .patch(`/admin/keys/${record.id}`)
      .set('Authorization', `Bearer ${product.adminToken}`)
      .send({ name: `${HOSTILE} 2` })
      .expect(200);
    for (const args of [
      ['list'],
      ['show', record.id],
      ['audit'],
      ['list', '--json'],
      ['show', record.id, '--json'],
      ['audit', '--json'],
    ]) {
      const run = await keys(...args);
      expectSuccess(run);
      expect({ args, raw: CONTROL.test(run.stdout) }).toEqual({ args, raw: false });
      expect(run.stdout).not.toMatch(/^FAKE/m);
    }
    const shown = await keys('show', record.id);
    expect(shown.stdout).toContain(
      'evil\\u001b[2J\\u001b]0;owned\\u0007\\u009b31m\\u202eton\\u0008\\u007f\\r\\nFAKE  line 2',
    );
    // JSON stays JSON and parses back to the very name.
    expect(JSON.parse((await keys('show', record.id, '--json')).stdout).name).toBe(`${HOSTILE} 2`);
  });
});
