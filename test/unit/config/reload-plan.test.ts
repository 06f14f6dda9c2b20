import { createHash } from 'node:crypto';
import {
  canonicalJson,
  changedSettings,
  configHash,
  loadConfig,
  planReload,
  redactedConfig,
  type Config,
} from '../../../src/shared/config';
import { failedReload, problemEntry } from '../../../src/shared/config/reload-outcome';
import { ConfigError } from '../../../src/shared/config/errors';

const base = (): Config => loadConfig({ env: { ADMIN_TOKEN: 'a'.repeat(40), SIGNING_SECRET: 's'.repeat(40) } });

describe('planReload', () => {
  it('takes every reloadable change and names the rest in restartNeeded, left as they were', () => {
    const current = base();
    const next = structuredClone(current);
    next.cors.allowedOrigins = ['https://app.example'];
    next.plans.pro = { perMinute: 1, perDay: 2 };
    next.server.port = 9999;
    next.redis.namespace = 'asg:other';
    next.ban.threshold = 99;
    const plan = planReload(current, next);
    expect(plan.applied.sort()).toEqual(['cors', 'plans']);
    expect(plan.restartNeeded.sort()).toEqual(['ban.threshold', 'redis.namespace', 'server.port']);
    expect(plan.inForce.cors.allowedOrigins).toEqual(['https://app.example']);
    expect(plan.inForce.plans.pro).toEqual({ perMinute: 1, perDay: 2 });
    expect([plan.inForce.server.port, plan.inForce.redis.namespace, plan.inForce.ban.threshold]).toEqual([
      current.server.port,
      current.redis.namespace,
      current.ban.threshold,
    ]);
    // The current config is not touched: requests in flight keep it.
    expect(current.cors.allowedOrigins).toEqual([]);
  });

  it('an unchanged config changes nothing', () => {
    expect(planReload(base(), base())).toMatchObject({ applied: [], restartNeeded: [] });
  });

  it('turning TLS on or off needs a restart; new files while TLS stays on are applied', () => {
    const off = base();
    const on = structuredClone(off);
    on.tls = { certFile: '/tls/a.crt', keyFile: '/tls/a.key' };
    expect(planReload(off, on)).toMatchObject({ applied: [], restartNeeded: ['tls.certFile', 'tls.keyFile'] });
    const renewed = structuredClone(on);
    renewed.tls = { certFile: '/tls/b.crt', keyFile: '/tls/b.key' };
    expect(planReload(on, renewed)).toMatchObject({ applied: ['tls.certFile', 'tls.keyFile'], restartNeeded: [] });
  });

  it('compares lists whole, as config files replace them whole', () => {
    expect(changedSettings({ a: [1, 2], b: { c: 1 } }, { a: [1, 3], b: { c: 1 } })).toEqual(['a']);
  });
});

describe('redaction and hash', () => {
  it('redacts every secret that is set, and hashes the redacted canonical JSON', () => {
    const config = base();
    config.signing.previousSecrets = ['p'.repeat(40)];
    config.redis.password = 'redis-pass';
    const shown = redactedConfig(config);
    expect([
      shown.admin.token,
      shown.signing.secret,
      shown.signing.previousSecrets,
      shown.redis.password,
      shown.redis.sentinelPassword,
    ]).toEqual(['[redacted]', '[redacted]', ['[redacted]'], '[redacted]', null]);
    expect(configHash(config)).toBe(createHash('sha256').update(canonicalJson(shown)).digest('hex'));
    const other = structuredClone(config);
    other.admin.token = 'b'.repeat(40);
    expect(configHash(other)).toBe(configHash(config));
  });

  it('redacts a password inside a URL (REDIS_URL, INVENTORY_URL) and keeps it out of the hash (issue 42)', () => {
    const withPassword = (password: string) => {
      const config = base();
      config.redis.url = `rediss://gateway:${password}@redis.internal:6380/2`;
      config.upstream.url = `http://inventory:${password}@inventory.internal:8090`;
      return config;
    };
    const shown = redactedConfig(withPassword('hunter2-S3cret'));
    expect(shown.redis.url).toBe('rediss://gateway:[redacted]@redis.internal:6380/2');
    expect(shown.upstream.url).toBe('http://inventory:[redacted]@inventory.internal:8090');
    expect(JSON.stringify(shown)).not.toContain('hunter2');
    // No offline guessing oracle: gateway_config_info{hash} is the same whatever the password.
    expect(configHash(withPassword('hunter2-S3cret'))).toBe(configHash(withPassword('another-one')));
    // A password with no user name, and one holding characters a URL escapes, go too; a URL without one is shown as it is.
    const bare = base();
    bare.redis.url = 'redis://:p%40ss:w0rd@127.0.0.1:6379/0';
    expect(redactedConfig(bare).redis.url).toBe('redis://:[redacted]@127.0.0.1:6379/0');
    bare.redis.url = 'redis://user@127.0.0.1:6379/0';
    expect(redactedConfig(bare).redis.url).toBe('redis://user@127.0.0.1:6379/0');
  });

  it('canonical JSON does not depend on key order', () => {
    expect(canonicalJson({ b: 1, a: { d: [1, { f: 2, e: 1 }], c: null } })).toBe(
      canonicalJson({ a: { c: null, d: [1, { e: 1, f: 2 }] }, b: 1 }),
    );
  });
});

describe('the refused reload answer', () => {
  it('names each bad setting from the ConfigError lines', () => {
    expect(problemEntry('invalid setting PORT (server.port): must be a whole number from 0 to 65535')).toEqual({
      setting: 'PORT (server.port)',
      message: 'must be a whole number from 0 to 65535',
    });
    expect(problemEntry('unknown setting cors.origins: config/default.yaml lists every setting')).toEqual({
      setting: 'cors.origins',
      message: 'config/default.yaml lists every setting',
    });
    expect(failedReload(new ConfigError(['invalid setting a.b: x', 'missing setting c: y']))).toEqual({
      result: 'failure',
      code: 'invalid_config',
      status: 400,
      message: 'The configuration was refused (2 problems); the config in force is unchanged.',
      errors: [
        { setting: 'a.b', message: 'x' },
        { setting: 'c', message: 'y' },
      ],
    });
  });
});
