import { ConfigError, envBindings, loadConfig, type Config } from '../../../src/shared/config';

/** Every environment variable of CONTRACT §2 sets its setting; the environment rules of staging and production. */

const secrets = { ADMIN_TOKEN: 'a'.repeat(32), SIGNING_SECRET: 's'.repeat(32) };

/** [variable, value, how to read the setting back, expected value] */
const contractVariables: Array<[string, string, (c: Config) => unknown, unknown]> = [
  ['APP_ENV', 'staging', (c) => c.env, 'staging'],
  ['PORT', '9080', (c) => c.server.port, 9080],
  ['ADMIN_PORT', '9081', (c) => c.server.adminPort, 9081],
  ['HOST', '127.0.0.1', (c) => c.server.host, '127.0.0.1'],
  ['ADMIN_HOST', '0.0.0.0', (c) => c.server.adminHost, '0.0.0.0'],
  ['INVENTORY_PORT', '9090', (c) => c.inventory.port, 9090],
  ['INVENTORY_URL', 'http://inventory.internal:8090', (c) => c.upstream.url, 'http://inventory.internal:8090'],
  ['REDIS_URL', 'redis://redis.internal:6379/2', (c) => c.redis.url, 'redis://redis.internal:6379/2'],
  [
    'REDIS_CLUSTER_NODES',
    'redis-a:7000, redis-b:7001,,redis-c:7002',
    (c) => c.redis.clusterNodes,
    ['redis-a:7000', 'redis-b:7001', 'redis-c:7002'],
  ],
  [
    'ADMIN_TOKEN',
    'admin-token-from-the-environment-0123456789',
    (c) => c.admin.token,
    'admin-token-from-the-environment-0123456789',
  ],
  ['DATA_DIR', '/var/lib/asg', (c) => c.dataDir, '/var/lib/asg'],
  ['LOG_LEVEL', 'warn', (c) => c.logLevel, 'warn'],
];

/** Variables this code adds beyond the contract's table. */
const extraVariables: Array<[string, string, (c: Config) => unknown, unknown]> = [
  ['PUBLIC_BASE_URL', 'https://api.example', (c) => c.server.publicBaseUrl, 'https://api.example'],
  [
    'SIGNING_SECRET',
    'signing-secret-from-the-environment-0123',
    (c) => c.signing.secret,
    'signing-secret-from-the-environment-0123',
  ],
  [
    'SIGNING_PREVIOUS_SECRETS',
    `${'p'.repeat(32)},${'q'.repeat(32)}`,
    (c) => c.signing.previousSecrets,
    ['p'.repeat(32), 'q'.repeat(32)],
  ],
];

describe('environment variables', () => {
  test.each([...contractVariables, ...extraVariables])('%s=%s sets its setting', (variable, value, read, expected) => {
    const base = loadConfig({ env: variable === 'APP_ENV' ? secrets : {} });
    const config = loadConfig({ env: { ...(variable === 'APP_ENV' ? secrets : {}), [variable]: value } });
    expect(read(base)).not.toEqual(expected);
    expect(read(config)).toEqual(expected);
  });

  test('every variable of CONTRACT §2 but CONFIG_FILE is bound to a setting', () => {
    const bound = envBindings.map((b) => b.variable);
    for (const [variable] of contractVariables) expect(bound).toContain(variable);
  });

  test('CONFIG_FILE names a file merged before the environment (see merge.test.ts)', () => {
    expect(() => loadConfig({ env: { CONFIG_FILE: '/nonexistent/config.yaml' } })).toThrow(ConfigError);
  });

  test('an empty variable counts as unset', () => {
    const config = loadConfig({ env: { PORT: '', REDIS_URL: '', LOG_LEVEL: '', REDIS_CLUSTER_NODES: '' } });
    expect([config.server.port, config.redis.url, config.logLevel, config.redis.clusterNodes]).toEqual([
      8080,
      null,
      'info',
      [],
    ]);
  });

  test('variables the config does not know are ignored', () => {
    expect(loadConfig({ env: { HOME: '/root', NODE_ENV: 'production', ADMIN_URL: 'http://x' } })).toEqual(
      loadConfig({ env: {} }),
    );
  });

  test('numbers from the environment become numbers; surrounding spaces are tolerated', () => {
    expect(loadConfig({ env: { PORT: ' 9000 ' } }).server.port).toBe(9000);
  });
});

describe('staging and production', () => {
  test.each(['staging', 'production'])(
    '%s needs ADMIN_TOKEN of at least 32 characters and SIGNING_SECRET',
    (appEnv) => {
      expect(() => loadConfig({ env: { APP_ENV: appEnv, SIGNING_SECRET: secrets.SIGNING_SECRET } })).toThrow(
        new ConfigError(
          `invalid setting ADMIN_TOKEN (admin.token): is required in ${appEnv} and must be at least 32 characters`,
        ),
      );
      expect(() =>
        loadConfig({ env: { APP_ENV: appEnv, SIGNING_SECRET: secrets.SIGNING_SECRET, ADMIN_TOKEN: 'a'.repeat(31) } }),
      ).toThrow(
        new ConfigError(
          `invalid setting ADMIN_TOKEN (admin.token): is required in ${appEnv} and must be at least 32 characters`,
        ),
      );
      expect(() => loadConfig({ env: { APP_ENV: appEnv, ADMIN_TOKEN: secrets.ADMIN_TOKEN } })).toThrow(
        new ConfigError(
          `invalid setting SIGNING_SECRET (signing.secret): is required in ${appEnv} (at least 32 characters)`,
        ),
      );
      expect(loadConfig({ env: { APP_ENV: appEnv, ...secrets } }).env).toBe(appEnv);
    },
  );

  test('development generates both, so neither is required', () => {
    const config = loadConfig({ env: {} });
    expect([config.admin.token, config.signing.secret]).toEqual([null, null]);
  });

  test('the inventory alone needs no admin token, but still its signing secret', () => {
    expect(
      loadConfig({ env: { APP_ENV: 'production', SIGNING_SECRET: secrets.SIGNING_SECRET }, role: 'inventory' }).env,
    ).toBe('production');
    expect(() => loadConfig({ env: { APP_ENV: 'production' }, role: 'inventory' })).toThrow(/SIGNING_SECRET/);
  });
});
