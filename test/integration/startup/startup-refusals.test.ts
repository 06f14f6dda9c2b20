import net from 'node:net';
import { isolatedEnv, LONG_ADMIN_TOKEN, LONG_SIGNING_SECRET, runMain, tempFile } from './startup-kit';
import { freePort } from '../../support/redis-server';

/**
 * Every setting is validated at startup; a bad value stops the process with a non-zero exit and
 * one clear line naming the setting, never a stack trace (CONTRACT §2).
 */

const missingFile = '/nonexistent/asg/config.json';

/** [label, environment, the one stderr line (after the program name)] */
const refusals: Array<[string, () => Record<string, string>, string | RegExp]> = [
  [
    'production without ADMIN_TOKEN',
    () => ({ APP_ENV: 'production', SIGNING_SECRET: LONG_SIGNING_SECRET }),
    'invalid setting ADMIN_TOKEN (admin.token): is required in production and must be at least 32 characters',
  ],
  [
    'staging with a short ADMIN_TOKEN',
    () => ({ APP_ENV: 'staging', ADMIN_TOKEN: 'a'.repeat(31), SIGNING_SECRET: LONG_SIGNING_SECRET }),
    'invalid setting ADMIN_TOKEN (admin.token): is required in staging and must be at least 32 characters',
  ],
  [
    'production without SIGNING_SECRET',
    () => ({ APP_ENV: 'production', ADMIN_TOKEN: LONG_ADMIN_TOKEN }),
    'invalid setting SIGNING_SECRET (signing.secret): is required in production (at least 32 characters)',
  ],
  [
    'production with a short SIGNING_SECRET',
    () => ({ APP_ENV: 'production', ADMIN_TOKEN: LONG_ADMIN_TOKEN, SIGNING_SECRET: 'short' }),
    'invalid setting SIGNING_SECRET (signing.secret): must be at least 32 characters',
  ],
  ['PORT=abc', () => ({ PORT: 'abc' }), 'invalid setting PORT (server.port): must be a whole number from 0 to 65535'],
  [
    'PORT=70000',
    () => ({ PORT: '70000' }),
    'invalid setting PORT (server.port): must be a whole number from 0 to 65535',
  ],
  ['PORT=80.5', () => ({ PORT: '80.5' }), 'invalid setting PORT (server.port): must be a whole number from 0 to 65535'],
  [
    'ADMIN_PORT=-1',
    () => ({ ADMIN_PORT: '-1' }),
    'invalid setting ADMIN_PORT (server.adminPort): must be a whole number from 0 to 65535',
  ],
  [
    'APP_ENV=bogus',
    () => ({ APP_ENV: 'bogus' }),
    'invalid setting APP_ENV: must be development, staging or production (got "bogus")',
  ],
  [
    'REDIS_URL=http://x',
    () => ({ REDIS_URL: 'http://x' }),
    'invalid setting REDIS_URL (redis.url): must look like redis://host:port/db',
  ],
  [
    'REDIS_CLUSTER_NODES without ports',
    () => ({ REDIS_CLUSTER_NODES: 'redis-a,redis-b' }),
    'invalid setting REDIS_CLUSTER_NODES (redis.clusterNodes.0): must be host:port',
  ],
  [
    'INVENTORY_URL=ftp://x',
    () => ({ INVENTORY_URL: 'ftp://inventory' }),
    'invalid setting INVENTORY_URL (upstream.url): must be an http:// or https:// URL',
  ],
  [
    'LOG_LEVEL=loud',
    () => ({ LOG_LEVEL: 'loud' }),
    'invalid setting LOG_LEVEL (logLevel): must be one of fatal, error, warn, info, debug, trace, silent',
  ],
  [
    'CONFIG_FILE naming a missing file',
    () => ({ CONFIG_FILE: missingFile }),
    `invalid setting CONFIG_FILE: ${missingFile} does not exist`,
  ],
  [
    'CONFIG_FILE with invalid JSON',
    () => ({ CONFIG_FILE: tempFile('broken.json', '{"server": {"port": 8080,}}') }),
    /^invalid setting CONFIG_FILE: \/\S+\/broken\.json is not valid JSON: .+$/,
  ],
  [
    // Issue 42: a 12 MB file froze the listener on reload; over 1 MiB is refused before it is parsed.
    'CONFIG_FILE over 1 MiB',
    () => ({ CONFIG_FILE: tempFile('huge.yaml', `# padding\n${'#'.repeat(1024 * 1024)}\n`) }),
    /^invalid setting CONFIG_FILE: \/\S+\/huge\.yaml is 1048587 bytes: a config file is at most 1 MiB \(1048576 bytes\)$/,
  ],
  [
    'CONFIG_FILE with invalid YAML',
    () => ({ CONFIG_FILE: tempFile('broken.yaml', 'server:\n  port: [8080\n') }),
    /^invalid setting CONFIG_FILE: \/\S+\/broken\.yaml is not valid YAML: .+$/,
  ],
  [
    'CONFIG_FILE JSON with an unknown key',
    () => ({ CONFIG_FILE: tempFile('unknown.json', JSON.stringify({ colour: 'blue' })) }),
    'unknown setting colour: config/default.yaml lists every setting',
  ],
  [
    'CONFIG_FILE JSON with an unknown nested key',
    () => ({ CONFIG_FILE: tempFile('unknown.json', JSON.stringify({ ban: { thresold: 3 } })) }),
    'unknown setting ban.thresold: config/default.yaml lists every setting',
  ],
  [
    'a plan with only perMinute',
    () => ({ CONFIG_FILE: tempFile('plans.yaml', 'plans:\n  gold:\n    perMinute: 5000\n') }),
    'invalid setting plans.gold: a plan sets both perMinute and perDay, or neither (limits then come from each key)',
  ],
  [
    'store.failMode outside local/open/closed',
    () => ({ CONFIG_FILE: tempFile('store.json', JSON.stringify({ store: { failMode: 'maybe' } })) }),
    'invalid setting STORE_FAIL_MODE (store.failMode): must be one of local, open, closed',
  ],
  [
    'a deprecation whose sunset precedes it',
    () => ({
      CONFIG_FILE: tempFile(
        'deprecations.yaml',
        'deprecations:\n  - { method: GET, path: "/pets/{petId}", deprecatedAt: "2030-01-01T00:00:00Z", sunset: "2029-01-01T00:00:00Z", successor: /v1/pets, docs: https://docs.example/x }\n',
      ),
    }),
    'invalid setting deprecations.0.sunset: must be after deprecatedAt',
  ],
  [
    'WORKERS=many',
    () => ({ WORKERS: 'many' }),
    'invalid setting WORKERS (workers): must be a whole number from 1 to 256, or auto',
  ],
  [
    'WORKERS=0',
    () => ({ WORKERS: '0' }),
    'invalid setting WORKERS (workers): must be a whole number from 1 to 256, or auto',
  ],
  [
    'WORKERS=2 without Redis',
    () => ({ WORKERS: '2' }),
    'invalid setting WORKERS (workers): more than one worker needs a shared store: set REDIS_URL, REDIS_CLUSTER_NODES or REDIS_SENTINELS (workers on the in-process store would each keep their own limits and keys)',
  ],
  [
    'WORKERS=auto without Redis',
    () => ({ WORKERS: 'auto' }),
    'invalid setting WORKERS (workers): more than one worker needs a shared store: set REDIS_URL, REDIS_CLUSTER_NODES or REDIS_SENTINELS (workers on the in-process store would each keep their own limits and keys)',
  ],
];

describe('refused settings', () => {
  test.each(refusals)(
    '%s: non-zero exit, one line naming the setting, no stack trace',
    async (_label, settings, line) => {
      const { code, stdout, stderr } = await runMain(await isolatedEnv(settings()));
      expect(code).not.toBeNull();
      expect(code).not.toBe(0);
      const lines = stderr.trimEnd().split('\n');
      expect(lines).toHaveLength(1);
      const [program, ...rest] = lines[0]!.split(': ');
      expect(program).toBe('animal-store-gateway');
      if (typeof line === 'string') expect(rest.join(': ')).toBe(line);
      else expect(rest.join(': ')).toMatch(line);
      expect(`${stdout}\n${stderr}`).not.toMatch(/^\s+at /m);
      // Refused before anything started: nothing was logged or printed.
      expect(stdout).toBe('');
    },
  );
});

/** [label, environment, every stderr line (after the program name), in order] */
const severalRefusals: Array<[string, () => Record<string, string>, string[]]> = [
  [
    'PORT=eighty and ADMIN_PORT=x',
    () => ({ PORT: 'eighty', ADMIN_PORT: 'x' }),
    [
      'invalid setting PORT (server.port): must be a whole number from 0 to 65535',
      'invalid setting ADMIN_PORT (server.adminPort): must be a whole number from 0 to 65535',
    ],
  ],
  [
    'production with neither ADMIN_TOKEN nor SIGNING_SECRET',
    () => ({ APP_ENV: 'production' }),
    [
      'invalid setting SIGNING_SECRET (signing.secret): is required in production (at least 32 characters)',
      'invalid setting ADMIN_TOKEN (admin.token): is required in production and must be at least 32 characters',
    ],
  ],
  [
    'an unknown APP_ENV, a bad LOG_LEVEL and WORKERS=0',
    () => ({ APP_ENV: 'prod', LOG_LEVEL: 'loud', WORKERS: '0' }),
    [
      'invalid setting APP_ENV: must be development, staging or production (got "prod")',
      'invalid setting WORKERS (workers): must be a whole number from 1 to 256, or auto',
      'invalid setting LOG_LEVEL (logLevel): must be one of fatal, error, warn, info, debug, trace, silent',
    ],
  ],
  [
    'two unknown keys and a bad value in one CONFIG_FILE',
    () => ({
      CONFIG_FILE: tempFile('several.json', JSON.stringify({ colour: 'blue', ban: { thresold: 3, threshold: 0 } })),
    }),
    [
      'unknown setting colour: config/default.yaml lists every setting',
      'unknown setting ban.thresold: config/default.yaml lists every setting',
      'invalid setting ban.threshold: must be a whole number of at least 1',
    ],
  ],
  [
    'webhooks: one to the admin listener, one over ftp, one without a secret',
    () => {
      const secret = `whsec_${Buffer.alloc(32, 9).toString('base64')}`;
      const hooks = [
        `{ url: "http://localhost:18181/hooks", secret: "${secret}" }`,
        `{ url: "ftp://hooks.example/x", secret: "${secret}" }`,
        '{ url: "https://hooks.example/x" }',
      ];
      return {
        ADMIN_PORT: '18181',
        CONFIG_FILE: tempFile(
          'webhooks.yaml',
          `notifications:\n  webhooks:\n${hooks.map((h) => `    - ${h}\n`).join('')}`,
        ),
      };
    },
    [
      "invalid setting notifications.webhooks.0.url: points at this gateway's admin listener (127.0.0.1:18181); a receiver must be another service",
      'invalid setting notifications.webhooks.1.url: must be an http:// or https:// URL',
      'invalid setting notifications.webhooks.2.secret: is required (or secretFile): must be whsec_ followed by the base64 of 24 to 64 random bytes, e.g. whsec_$(openssl rand -base64 32)',
    ],
  ],
];

describe('several bad settings at once', () => {
  test.each(severalRefusals)(
    '%s: every one named, one line each, non-zero exit',
    async (_label, settings, expected) => {
      const { code, stdout, stderr } = await runMain(await isolatedEnv(settings()));
      expect(code).not.toBe(0);
      expect(code).not.toBeNull();
      const lines = stderr.trimEnd().split('\n');
      expect(lines.map((line) => line.replace(/^animal-store-gateway: /, '')).sort()).toEqual([...expected].sort());
      expect(lines.every((line) => line.startsWith('animal-store-gateway: '))).toBe(true);
      expect(stdout).toBe('');
    },
  );
});

test('a port already in use stops startup with one line and a non-zero exit', async () => {
  const env = await isolatedEnv();
  const occupier = net.createServer();
  await new Promise<void>((resolve) => occupier.listen(Number(env.ADMIN_PORT), '0.0.0.0', resolve));
  try {
    const { code, stderr } = await runMain(env);
    expect(code).not.toBe(0);
    expect(code).not.toBeNull();
    const lines = stderr.trimEnd().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^animal-store-gateway: cannot start: a port is already in use .*EADDRINUSE/);
    expect(stderr).not.toMatch(/^\s+at /m);
  } finally {
    await new Promise((resolve) => occupier.close(resolve));
  }
});

test('an unreachable Redis stops startup with one line naming REDIS_URL and no stack trace', async () => {
  const closedPort = await freePort();
  const { code, stderr } = await runMain(await isolatedEnv({ REDIS_URL: `redis://127.0.0.1:${closedPort}` }));
  expect(code).not.toBe(0);
  expect(code).not.toBeNull();
  const lines = stderr.trimEnd().split('\n');
  expect(lines).toEqual([
    'animal-store-gateway: cannot start: Redis is unreachable (ECONNREFUSED); check REDIS_URL, REDIS_CLUSTER_NODES or REDIS_SENTINELS',
  ]);
});
