import fs from 'node:fs';
import path from 'node:path';
import { stringify as toYaml } from 'yaml';
import { ConfigError, loadConfig, mergeConfig } from '../../../src/shared/config';
import { useTempDirs } from '../../support/temp-dirs';

/**
 * Config files merge default → config/<APP_ENV> → CONFIG_FILE → environment → overrides; objects
 * merge key by key, arrays are replaced whole (CONTRACT §2).
 */

const REAL_CONFIG_DIR = path.resolve(__dirname, '..', '..', '..', 'config');

const { tempDir } = useTempDirs('asg-config-unit-');

function writeFile(dir: string, name: string, content: unknown): string {
  const file = path.join(dir, name);
  fs.writeFileSync(
    file,
    typeof content === 'string' ? content : name.endsWith('.json') ? JSON.stringify(content) : toYaml(content),
  );
  return file;
}

/** A config dir whose default.yaml is the real one and whose development file sets markers. */
function configDirWithDevelopmentFile(name = 'development.yaml'): string {
  const dir = tempDir();
  fs.copyFileSync(path.join(REAL_CONFIG_DIR, 'default.yaml'), path.join(dir, 'default.yaml'));
  writeFile(dir, name, {
    server: { port: 1111, trustedProxies: ['10.0.0.1', '10.0.0.2'] },
    ban: { threshold: 11 },
    logLevel: 'warn',
  });
  return dir;
}

const configFileContent = {
  server: { port: 2222, trustedProxies: ['10.9.9.9'] },
  ban: { windowSeconds: 22 },
};

describe('merge order', () => {
  test('default alone', () => {
    const dir = tempDir();
    fs.copyFileSync(path.join(REAL_CONFIG_DIR, 'default.yaml'), path.join(dir, 'default.yaml'));
    const config = loadConfig({ env: {}, configDir: dir });
    expect(config.server).toEqual(
      expect.objectContaining({ host: '0.0.0.0', port: 8080, adminPort: 8081, trustedProxies: [] }),
    );
    expect(config.ban).toEqual({ threshold: 10, windowSeconds: 60, durationSeconds: 900 });
    expect(config.logLevel).toBe('info');
  });

  test('the APP_ENV file over default, key by key', () => {
    const config = loadConfig({ env: {}, configDir: configDirWithDevelopmentFile() });
    expect(config.server).toEqual(
      expect.objectContaining({
        host: '0.0.0.0',
        port: 1111,
        adminPort: 8081,
        trustedProxies: ['10.0.0.1', '10.0.0.2'],
      }),
    );
    expect(config.ban).toEqual({ threshold: 11, windowSeconds: 60, durationSeconds: 900 });
    expect(config.logLevel).toBe('warn');
  });

  test.each(['development.yml', 'development.json'])('the APP_ENV file may be %s', (name) => {
    expect(loadConfig({ env: {}, configDir: configDirWithDevelopmentFile(name) }).server.port).toBe(1111);
  });

  test.each(['extra.yaml', 'extra.json'])('CONFIG_FILE (%s) over the APP_ENV file; arrays replaced whole', (name) => {
    const file = writeFile(tempDir(), name, configFileContent);
    const config = loadConfig({ env: { CONFIG_FILE: file }, configDir: configDirWithDevelopmentFile() });
    expect(config.server).toEqual(
      expect.objectContaining({ host: '0.0.0.0', port: 2222, trustedProxies: ['10.9.9.9'] }),
    );
    expect(config.ban).toEqual({ threshold: 11, windowSeconds: 22, durationSeconds: 900 });
    expect(config.logLevel).toBe('warn');
  });

  test('environment variables over CONFIG_FILE', () => {
    const file = writeFile(tempDir(), 'extra.json', { ...configFileContent, logLevel: 'error' });
    const config = loadConfig({
      env: { CONFIG_FILE: file, PORT: '3333', LOG_LEVEL: 'debug' },
      configDir: configDirWithDevelopmentFile(),
    });
    expect(config.server.port).toBe(3333);
    expect(config.server.trustedProxies).toEqual(['10.9.9.9']);
    expect(config.logLevel).toBe('debug');
  });

  test('overrides (tests, embedded runs) over the environment', () => {
    const config = loadConfig({
      env: { PORT: '3333' },
      configDir: configDirWithDevelopmentFile(),
      overrides: { server: { port: 4444 } },
    });
    expect(config.server).toEqual(
      expect.objectContaining({ port: 4444, host: '0.0.0.0', trustedProxies: ['10.0.0.1', '10.0.0.2'] }),
    );
  });

  test('a relative CONFIG_FILE is read from the working directory', () => {
    const file = writeFile(tempDir(), 'relative.yaml', { logLevel: 'trace' });
    const relative = path.relative(process.cwd(), file);
    expect(path.isAbsolute(relative)).toBe(false);
    expect(loadConfig({ env: { CONFIG_FILE: relative } }).logLevel).toBe('trace');
  });

  test('an empty CONFIG_FILE changes nothing', () => {
    const file = writeFile(tempDir(), 'empty.yaml', '# nothing here\n');
    expect(loadConfig({ env: { CONFIG_FILE: file } })).toEqual(loadConfig({ env: {} }));
  });

  test('plans merge key by key: a new plan joins, a changed limit keeps its sibling', () => {
    const file = writeFile(tempDir(), 'plans.yaml', {
      plans: { gold: { perMinute: 5000, perDay: 5_000_000 }, free: { perMinute: 10 } },
    });
    const { plans } = loadConfig({ env: { CONFIG_FILE: file } });
    expect(plans).toEqual({
      free: { perMinute: 10, perDay: 1000 },
      pro: { perMinute: 300, perDay: 10000 },
      business: { perMinute: 1000, perDay: 100000 },
      enterprise: {},
      gold: { perMinute: 5000, perDay: 5_000_000 },
    });
  });

  test('deprecations, a list, are replaced whole', () => {
    const only = {
      method: 'POST',
      path: '/pets',
      deprecatedAt: '2027-01-01T00:00:00Z',
      sunset: '2031-01-01T00:00:00+02:00',
      successor: '/v2/pets',
      docs: 'https://docs.example/post-pets',
    };
    const file = writeFile(tempDir(), 'deprecations.json', { deprecations: [only] });
    expect(loadConfig({ env: { CONFIG_FILE: file } }).deprecations).toEqual([only]);
  });

  test('a CONFIG_FILE that is not a mapping is refused', () => {
    const file = writeFile(tempDir(), 'list.yaml', '- a\n- b\n');
    expect(() => loadConfig({ env: { CONFIG_FILE: file } })).toThrow(
      new ConfigError(`invalid setting CONFIG_FILE: ${file} must hold a mapping of settings at the top level`),
    );
  });
});

describe('the real config files', () => {
  const secrets = { ADMIN_TOKEN: 'a'.repeat(32), SIGNING_SECRET: 's'.repeat(32) };

  test.each([
    ['development', {}, 'asg_dev_', 'asg:dev', 'info', null],
    ['staging', secrets, 'asg_test_', 'asg:staging', 'debug', 'https://staging-api.animalstore.example'],
    ['production', secrets, 'asg_live_', 'asg:prod', 'info', 'https://api.animalstore.example'],
  ])(
    '%s: its prefix, namespace, log level and base URL over the defaults',
    (appEnv, env, prefix, namespace, logLevel, publicBaseUrl) => {
      const config = loadConfig({ env: { APP_ENV: appEnv, ...env } });
      expect({
        env: config.env,
        prefix: config.keys.prefix,
        namespace: config.redis.namespace,
        logLevel: config.logLevel,
        publicBaseUrl: config.server.publicBaseUrl,
        port: config.server.port,
        plans: config.plans,
      }).toEqual({
        env: appEnv,
        prefix,
        namespace,
        logLevel,
        publicBaseUrl,
        port: 8080,
        plans: {
          free: { perMinute: 60, perDay: 1000 },
          pro: { perMinute: 300, perDay: 10000 },
          business: { perMinute: 1000, perDay: 100000 },
          enterprise: {},
        },
      });
    },
  );

  test('the contract keys have their documented defaults', () => {
    const config = loadConfig({ env: {} });
    expect(config.anonymous).toEqual({ perMinute: 30 });
    expect(config.ban).toEqual({ threshold: 10, windowSeconds: 60, durationSeconds: 900 });
    expect(config.store.failMode).toBe('local');
    expect(config.server.maxBodyBytes).toBe(16 * 1024);
    expect(config.server.adminPort).toBe(8081);
    expect(config.server.host).toBe('0.0.0.0');
    expect(config.server.adminHost).toBe('127.0.0.1');
    expect(config.workers).toBe(1);
    expect(config.cors.allowedOrigins).toEqual([]);
    expect(config.inventory.port).toBe(8090);
    expect(config.redis.url).toBeNull();
    expect(config.upstream.url).toBeNull();
    expect(config.dataDir).toBe('./data');
  });
});

describe('mergeConfig', () => {
  test('objects key by key, arrays and scalars whole, null replaces; neither input changes', () => {
    const base = { a: { b: 1, c: [1, 2, 3], d: { e: 'x', f: 'y' } }, g: 'keep', h: { i: 1 } };
    const override = { a: { c: [9], d: { f: 'z' } }, h: null, j: true };
    const snapshot = JSON.stringify([base, override]);
    expect(mergeConfig(base, override)).toEqual({
      a: { b: 1, c: [9], d: { e: 'x', f: 'z' } },
      g: 'keep',
      h: null,
      j: true,
    });
    expect(JSON.stringify([base, override])).toBe(snapshot);
  });

  test('an object replaces a scalar and a scalar an object', () => {
    expect(mergeConfig({ a: 1, b: { c: 1 } }, { a: { x: 1 }, b: 2 })).toEqual({ a: { x: 1 }, b: 2 });
  });
});
