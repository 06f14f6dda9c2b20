import { ConfigError, loadConfig } from '../../../src/shared/config';

/**
 * What a bad setting says: one line naming it in plain words, never zod's own wording
 * ("Invalid input: expected number, received string"). The startup suite checks the same lines
 * reach stderr of the real process.
 */

function refusal(load: () => unknown): string {
  try {
    load();
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as Error).message;
  }
  throw new Error('the configuration was accepted');
}

const fromEnv = (env: Record<string, string>) => () => loadConfig({ env });
const fromOverrides = (overrides: Record<string, unknown>) => () =>
  loadConfig({ env: {}, overrides: overrides as never });

describe('messages', () => {
  test.each([
    [
      'PORT=abc',
      fromEnv({ PORT: 'abc' }),
      'invalid setting PORT (server.port): must be a whole number from 0 to 65535',
    ],
    [
      'PORT=70000',
      fromEnv({ PORT: '70000' }),
      'invalid setting PORT (server.port): must be a whole number from 0 to 65535',
    ],
    ['PORT=-1', fromEnv({ PORT: '-1' }), 'invalid setting PORT (server.port): must be a whole number from 0 to 65535'],
    ['accepted: PORT=1e3, a number in exponent form', fromEnv({ PORT: '1e3' }), null],
    ['accepted: a port written as a string in a file', fromOverrides({ server: { port: '8080' } }), null],
    [
      'a port as true',
      fromOverrides({ server: { port: true } }),
      'invalid setting PORT (server.port): must be a whole number from 0 to 65535',
    ],
    [
      'ban.threshold 0',
      fromOverrides({ ban: { threshold: 0 } }),
      'invalid setting ban.threshold: must be a whole number of at least 1',
    ],
    [
      'anonymous.perMinute 2.5',
      fromOverrides({ anonymous: { perMinute: 2.5 } }),
      'invalid setting anonymous.perMinute: must be a whole number of at least 1',
    ],
    [
      'upstream.timeoutMs too long',
      fromOverrides({ upstream: { timeoutMs: 3_600_001 } }),
      'invalid setting upstream.timeoutMs: must be a whole number from 1 to 3600000',
    ],
    [
      'upstream.maxPending -1',
      fromOverrides({ upstream: { maxPending: -1 } }),
      'invalid setting upstream.maxPending: must be a whole number from 0 to 100000',
    ],
    [
      'accepted: upstream.maxPending 0 (no waiting beyond the sockets)',
      fromOverrides({ upstream: { maxPending: 0 } }),
      null,
    ],
    [
      'upstream.circuitBreaker.minimumRequests 0',
      fromOverrides({ upstream: { circuitBreaker: { minimumRequests: 0 } } }),
      'invalid setting upstream.circuitBreaker.minimumRequests: must be a whole number of at least 1',
    ],
    [
      'upstream.circuitBreaker.failureRatio 0',
      fromOverrides({ upstream: { circuitBreaker: { failureRatio: 0 } } }),
      'invalid setting upstream.circuitBreaker.failureRatio: must be a number above 0 and at most 1, e.g. 0.5',
    ],
    [
      'upstream.circuitBreaker.failureRatio 1.5',
      fromOverrides({ upstream: { circuitBreaker: { failureRatio: 1.5 } } }),
      'invalid setting upstream.circuitBreaker.failureRatio: must be a number above 0 and at most 1, e.g. 0.5',
    ],
    [
      'accepted: upstream.circuitBreaker.failureRatio 1 (every request failing)',
      fromOverrides({ upstream: { circuitBreaker: { failureRatio: 1 } } }),
      null,
    ],
    [
      'upstream.circuitBreaker.consecutiveFailures (the rule before issue 48)',
      fromOverrides({ upstream: { circuitBreaker: { consecutiveFailures: 5 } } }),
      'invalid setting upstream.circuitBreaker.consecutiveFailures: was replaced by failureRatio, minimumRequests and windowMs, a share of failures over a window (docs/configuration.md)',
    ],
    [
      'LOG_LEVEL=loud',
      fromEnv({ LOG_LEVEL: 'loud' }),
      'invalid setting LOG_LEVEL (logLevel): must be one of fatal, error, warn, info, debug, trace, silent',
    ],
    [
      'APP_ENV=bogus',
      fromEnv({ APP_ENV: 'bogus' }),
      'invalid setting APP_ENV: must be development, staging or production (got "bogus")',
    ],
    [
      'REDIS_URL=http://x',
      fromEnv({ REDIS_URL: 'http://x' }),
      'invalid setting REDIS_URL (redis.url): must look like redis://host:port/db',
    ],
    [
      'PUBLIC_BASE_URL=example.com',
      fromEnv({ PUBLIC_BASE_URL: 'example.com' }),
      'invalid setting PUBLIC_BASE_URL (server.publicBaseUrl): must be an http:// or https:// URL',
    ],
    [
      'an unknown top-level key',
      fromOverrides({ colour: 'blue' }),
      'unknown setting colour: config/default.yaml lists every setting',
    ],
    [
      'an unknown nested key',
      fromOverrides({ server: { prot: 1 } }),
      'unknown setting server.prot: config/default.yaml lists every setting',
    ],
    [
      'a section that is not a mapping',
      fromOverrides({ ban: 'strict' }),
      'invalid setting ban: must be a mapping of settings',
    ],
    [
      'a list that is not a list',
      fromOverrides({ server: { trustedProxies: '10.0.0.1' } }),
      'invalid setting server.trustedProxies: must be a list',
    ],
    ['an empty host', fromOverrides({ server: { host: '' } }), 'invalid setting HOST (server.host): must not be empty'],
    [
      'a bad namespace',
      fromOverrides({ redis: { namespace: 'asg prod' } }),
      'invalid setting redis.namespace: must be letters, digits, ":", "_" or "-", e.g. asg:prod',
    ],
    [
      'a bad key prefix',
      fromOverrides({ keys: { prefix: 'live' } }),
      'invalid setting keys.prefix: must look like asg_live_',
    ],
    [
      'a plan with only perMinute',
      fromOverrides({ plans: { gold: { perMinute: 5 } } }),
      'invalid setting plans.gold: a plan sets both perMinute and perDay, or neither (limits then come from each key)',
    ],
    [
      'a plan with only perDay',
      fromOverrides({ plans: { gold: { perDay: 5 } } }),
      'invalid setting plans.gold: a plan sets both perMinute and perDay, or neither (limits then come from each key)',
    ],
    [
      'a plan named in capitals',
      fromOverrides({ plans: { Gold: { perMinute: 5, perDay: 50 } } }),
      'invalid setting plans.Gold: a plan name is lower-case letters, digits, "_" or "-"',
    ],
    [
      'a plan with an unknown limit',
      fromOverrides({ plans: { gold: { perHour: 5 } } }),
      'unknown setting plans.gold.perHour: config/default.yaml lists every setting',
    ],
    [
      'an unknown window shape',
      fromOverrides({ rateLimit: { minuteWindow: 'rolling' } }),
      'invalid setting RATE_LIMIT_MINUTE_WINDOW (rateLimit.minuteWindow): must be one of fixed, sliding',
    ],
    [
      'RATE_LIMIT_MINUTE_WINDOW=leaky',
      fromEnv({ RATE_LIMIT_MINUTE_WINDOW: 'leaky' }),
      'invalid setting RATE_LIMIT_MINUTE_WINDOW (rateLimit.minuteWindow): must be one of fixed, sliding',
    ],
    ['accepted: RATE_LIMIT_MINUTE_WINDOW=sliding', fromEnv({ RATE_LIMIT_MINUTE_WINDOW: 'sliding' }), null],
    [
      'a negative jitter',
      fromOverrides({ rateLimit: { retryAfterJitterSeconds: -1 } }),
      'invalid setting RATE_LIMIT_RETRY_AFTER_JITTER_SECONDS (rateLimit.retryAfterJitterSeconds): must be a whole number from 0 to 3600',
    ],
    [
      'a jitter of 1.5 s',
      fromEnv({ RATE_LIMIT_RETRY_AFTER_JITTER_SECONDS: '1.5' }),
      'invalid setting RATE_LIMIT_RETRY_AFTER_JITTER_SECONDS (rateLimit.retryAfterJitterSeconds): must be a whole number from 0 to 3600',
    ],
    [
      'a plan shadowed with "yes"',
      fromOverrides({ plans: { gold: { perMinute: 5, perDay: 50, shadow: 'yes' } } }),
      'invalid setting plans.gold.shadow: must be true or false',
    ],
    ['accepted: a shadowed plan', fromOverrides({ plans: { gold: { perMinute: 5, perDay: 50, shadow: true } } }), null],
    [
      'store.failMode maybe',
      fromOverrides({ store: { failMode: 'maybe' } }),
      'invalid setting STORE_FAIL_MODE (store.failMode): must be one of local, open, closed',
    ],
  ])('%s', (_label, load, message) => {
    if (message === null) {
      expect(load).not.toThrow();
      return;
    }
    const line = refusal(load);
    expect(line).toBe(message);
    expect(line).not.toContain('\n');
    expect(line).not.toMatch(/Invalid input|expected .*, received|Too (big|small)/);
  });

  test('a secret is never repeated in the message', () => {
    const secret = 'short-secret';
    const line = refusal(fromEnv({ APP_ENV: 'production', ADMIN_TOKEN: 'a'.repeat(32), SIGNING_SECRET: secret }));
    expect(line).toBe('invalid setting SIGNING_SECRET (signing.secret): must be at least 32 characters');
    expect(line).not.toContain(secret);
  });
});

/** Issue 48 (item 8): server.trustedProxies takes what allowedAddresses takes, and names what it cannot match. */
describe('server.trustedProxies', () => {
  test('addresses and CIDR ranges of both families, in any written form, are accepted as written', () => {
    const proxies = ['10.0.0.0/8', '192.0.2.7', '::1/128', '0:0:0:0:0:0:0:1', '2001:DB8::/32', '::ffff:10.0.0.0/104'];
    expect(loadConfig({ env: {}, overrides: { server: { trustedProxies: proxies } } }).server.trustedProxies).toEqual(
      proxies,
    );
  });

  test.each([
    ['a host name', 'proxy.internal'],
    ['a prefix too long', '10.0.0.0/33'],
    ['an IPv6 prefix too long', '::1/129'],
    ['an address out of range', '300.1.1.1'],
    ['a zone id', 'fe80::1%eth0'],
    ['an empty entry', ''],
  ])('%s is refused, naming the entry', (_label, entry) => {
    const line = refusal(fromOverrides({ server: { trustedProxies: ['127.0.0.1', entry] } }));
    expect(line).toBe(
      `invalid setting server.trustedProxies.1: ${JSON.stringify(entry)} is not an IPv4/IPv6 address or CIDR range (such as 10.0.0.0/8, 192.0.2.7, ::1, 2001:db8::/32)`,
    );
  });
});

describe('deprecations', () => {
  const valid = {
    method: 'GET',
    path: '/pets/{petId}',
    deprecatedAt: '2025-12-05T00:00:00Z',
    sunset: '2030-12-05T00:00:00Z',
    successor: '/v1/pets',
    docs: 'https://docs.animalstore.example/deprecations/get-pet',
  };
  const withDeprecations = (...deprecations: unknown[]) => fromOverrides({ deprecations });

  test("the default file deprecates GET /pets/{petId} with the contract's sunset", () => {
    expect(loadConfig({ env: {} }).deprecations).toEqual([valid]);
  });

  test('an empty list and instants with offsets are accepted', () => {
    expect(withDeprecations()).not.toThrow();
    expect(
      loadConfig({
        env: {},
        overrides: {
          deprecations: [{ ...valid, sunset: '2030-12-05T01:00:00+01:00', deprecatedAt: '2025-12-05T00:00:00.000Z' }],
        },
      }).deprecations,
    ).toHaveLength(1);
  });

  test.each([
    [
      'a sunset before deprecatedAt',
      { sunset: '2025-01-01T00:00:00Z' },
      'invalid setting deprecations.0.sunset: must be after deprecatedAt',
    ],
    [
      'a sunset equal to deprecatedAt',
      { sunset: '2025-12-05T01:00:00+01:00' },
      'invalid setting deprecations.0.sunset: must be after deprecatedAt',
    ],
    [
      'an instant without a time zone',
      { deprecatedAt: '2025-12-05T00:00:00' },
      'invalid setting deprecations.0.deprecatedAt: must be an ISO 8601 instant with a time zone, e.g. 2030-12-05T00:00:00Z',
    ],
    [
      'a date in words',
      { sunset: 'Thu, 05 Dec 2030 00:00:00 GMT' },
      'invalid setting deprecations.0.sunset: must be an ISO 8601 instant with a time zone, e.g. 2030-12-05T00:00:00Z',
    ],
    [
      'an unknown method',
      { method: 'FETCH' },
      'invalid setting deprecations.0.method: must be one of GET, POST, PUT, PATCH, DELETE',
    ],
    [
      'a lower-case method',
      { method: 'get' },
      'invalid setting deprecations.0.method: must be one of GET, POST, PUT, PATCH, DELETE',
    ],
    [
      'a path without its leading slash',
      { path: 'pets/{petId}' },
      'invalid setting deprecations.0.path: must be a route template under the base path, e.g. /pets/{petId}',
    ],
    [
      'a path with a query',
      { path: '/pets?status=sold' },
      'invalid setting deprecations.0.path: must be a route template under the base path, e.g. /pets/{petId}',
    ],
    [
      'an operation not in the table',
      { method: 'DELETE' },
      'invalid setting deprecations.0: DELETE /pets/{petId} is no operation of the public API (GET /pets, POST /pets, GET /pets/{petId}, GET /usage, POST /keys/revoke)',
    ],
    ['an empty successor', { successor: '' }, 'invalid setting deprecations.0.successor: must not be empty'],
    ['a missing docs link', { docs: undefined }, 'missing setting deprecations.0.docs: must be a string'],
    [
      'an unknown field',
      { sunsetAt: '2030-12-05T00:00:00Z' },
      'unknown setting deprecations.0.sunsetAt: config/default.yaml lists every setting',
    ],
  ])('%s is refused', (_label, change, message) => {
    const entry: Record<string, unknown> = { ...valid, ...change };
    for (const [field, value] of Object.entries(entry)) if (value === undefined) delete entry[field];
    expect(refusal(withDeprecations(entry))).toBe(message);
  });

  test('the failing entry is named by its index', () => {
    expect(
      refusal(withDeprecations(valid, { ...valid, method: 'POST', path: '/pets', sunset: '2020-01-01T00:00:00Z' })),
    ).toBe('invalid setting deprecations.1.sunset: must be after deprecatedAt');
  });

  test('deprecations must be a list', () => {
    expect(refusal(fromOverrides({ deprecations: valid }))).toBe('invalid setting deprecations: must be a list');
  });
});

describe('costs and month quotas (CONTRACT §4)', () => {
  const post = { method: 'POST', path: '/pets', cost: 4 };

  test('the default file has no costs and the seed plans have no month window', () => {
    const config = loadConfig({ env: {} });
    expect(config.costs).toEqual([]);
    for (const plan of Object.values(config.plans)) expect(plan.perMonth).toBeUndefined();
  });

  test('a cost rule and a plan perMonth are accepted', () => {
    const config = loadConfig({
      env: {},
      overrides: { costs: [post], plans: { metered: { perMinute: 10, perDay: 100, perMonth: 1000 } } } as never,
    });
    expect(config.costs).toEqual([post]);
    expect(config.plans.metered!.perMonth).toBe(1000);
  });

  test('a plan limit below the largest cost is refused, every such row named', () => {
    const message = refusal(
      fromOverrides({
        costs: [{ method: 'GET', path: '/pets', cost: 2 }, post],
        plans: { tiny: { perMinute: 3, perDay: 100, perMonth: 2 } },
      }),
    );
    expect(message).toContain(
      'invalid setting plans.tiny.perMinute: is 3, below the cost 4 of POST /pets: such a request could never be served',
    );
    expect(message).toContain('invalid setting plans.tiny.perMonth: is 2, below the cost 4 of POST /pets');
    expect(message).not.toContain('plans.tiny.perDay');
    expect(message).not.toContain('plans.free');
  });

  test.each([
    ['a cost of 0', [{ ...post, cost: 0 }], 'invalid setting costs.0.cost: must be a whole number from 1 to 1000000'],
    ['a cost rule given twice', [post, { ...post, cost: 2 }], 'invalid setting costs.1: POST /pets has a cost already'],
    [
      'a path that is no template',
      [{ ...post, path: 'pets' }],
      'invalid setting costs.0.path: must be a route template under the base path, e.g. /pets/{petId}',
    ],
    [
      'a row that names no operation of the table',
      [post, { ...post, method: 'DELETE', path: '/pets/{petId}' }],
      'invalid setting costs.1: DELETE /pets/{petId} is no operation of the public API (GET /pets, POST /pets, GET /pets/{petId}, GET /usage, POST /keys/revoke)',
    ],
  ])('%s is refused', (_label, costs, message) => {
    expect(refusal(fromOverrides({ costs }))).toBe(message);
  });

  test('perMonth without perMinute and perDay is refused', () => {
    expect(refusal(fromOverrides({ plans: { odd: { perMonth: 10 } } }))).toContain('plans.odd.perMonth');
  });
});
