import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Redis from 'ioredis';
import { assertRedisServerAvailable, freePort } from '../../support/redis-server';

/**
 * config/redis/compose-redis.sh, the compose Redis's start script, run for real (outside Docker,
 * its paths moved by the environment): it must start a Redis whose default user can only PING
 * (the compose healthcheck) and whose two gateway users each reach only their own namespace, with
 * the passwords from the secret files.
 */

const SCRIPT = path.join(__dirname, '..', '..', '..', 'config', 'redis', 'compose-redis.sh');
const RULES = path.join(__dirname, '..', '..', '..', 'config', 'redis', 'gateway-acl.txt');
const MAKE_SECRETS = path.join(__dirname, '..', '..', '..', 'scripts', 'compose-secrets.sh');

let dir: string;
let port: number;
let server: ChildProcess | undefined;
const clients: Redis[] = [];

function writeSecrets(prod: string, staging: string): void {
  fs.writeFileSync(path.join(dir, 'prod_redis_password'), `${prod}\n`);
  fs.writeFileSync(path.join(dir, 'staging_redis_password'), `${staging}\n`);
}

function runScript(): { child: ChildProcess; stderr: () => string; exited: Promise<number | null> } {
  const env = {
    ...process.env,
    ACL_RULES_FILE: RULES,
    SECRETS_DIR: dir,
    ACL_FILE: path.join(dir, 'users.acl'),
    REDIS_ENTRYPOINT: '',
  };
  const child = spawn(
    'sh',
    [SCRIPT, '--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--appendonly', 'no', '--save', ''],
    {
      env,
      stdio: ['ignore', 'ignore', 'pipe'],
    },
  );
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, stderr: () => stderr, exited };
}

function client(options: { username?: string; password?: string } = {}): Redis {
  // No ready check: it sends INFO, which the default user may not run.
  const c = new Redis(port, '127.0.0.1', {
    ...options,
    lazyConnect: true,
    enableReadyCheck: false,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
  c.on('error', () => {});
  clients.push(c);
  return c;
}

/** Connects once the server listens (the script starts it in the background of the test). */
async function connectWhenUp(c: Redis): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    try {
      await c.connect();
      return;
    } catch (err) {
      if (attempt > 100) throw err;
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}

beforeEach(async () => {
  assertRedisServerAvailable();
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'asg-compose-redis-'));
  port = await freePort();
});

afterEach(async () => {
  for (const c of clients.splice(0)) c.disconnect();
  if (server && server.exitCode === null) {
    const gone = new Promise((resolve) => server!.once('exit', resolve));
    server.kill('SIGKILL');
    await gone;
  }
  server = undefined;
  fs.rmSync(dir, { recursive: true, force: true });
});

it('starts Redis with the gateway users of the secret files, each confined to its namespace, and a default user that can only PING', async () => {
  writeSecrets('prod-secret-0123456789abcdef', 'staging-secret-0123456789abcdef');
  server = runScript().child;
  const anonymous = client();
  await connectWhenUp(anonymous);
  expect(await anonymous.ping()).toBe('PONG');
  await expect(anonymous.get('asg:prod:anything')).rejects.toThrow(/NOPERM/);

  const prod = client({ username: 'asg-prod', password: 'prod-secret-0123456789abcdef' });
  await prod.connect();
  await prod.set('asg:prod:probe', '1');
  expect(await prod.get('asg:prod:probe')).toBe('1');
  await expect(prod.get('asg:staging:probe')).rejects.toThrow(/NOPERM/);
  await expect(prod.call('FLUSHALL')).rejects.toThrow(/NOPERM/);

  const staging = client({ username: 'asg-staging', password: 'staging-secret-0123456789abcdef' });
  await staging.connect();
  await expect(staging.get('asg:prod:probe')).rejects.toThrow(/NOPERM/);
  await staging.set('asg:staging:probe', '2');

  await expect(anonymous.call('AUTH', 'asg-prod', 'staging-secret-0123456789abcdef')).rejects.toThrow(/WRONGPASS/);
  // The ACL file it wrote is readable by its owner only.
  expect(fs.statSync(path.join(dir, 'users.acl')).mode & 0o077).toBe(0);
});

it('runs on the secrets scripts/compose-secrets.sh makes, which it makes once and then leaves alone', async () => {
  const make = () =>
    execFileSync('sh', [MAKE_SECRETS], { env: { ...process.env, SECRETS_DIR: dir }, encoding: 'utf8' });
  expect(make().trim().split('\n')).toHaveLength(7);
  const files = fs.readdirSync(dir).sort();
  const values = files.map((f) => fs.readFileSync(path.join(dir, f), 'utf8'));
  for (const value of values) expect(value).toMatch(/^[0-9a-f]{64}\n$/);
  expect(new Set(values).size).toBe(7);
  expect(make()).toBe('');
  expect(files.map((f) => fs.readFileSync(path.join(dir, f), 'utf8'))).toEqual(values);

  server = runScript().child;
  const prod = client({ username: 'asg-prod', password: values[files.indexOf('prod_redis_password')]!.trim() });
  await connectWhenUp(prod);
  await prod.set('asg:prod:probe', '1');
});

it('refuses to start, naming the file, when a password file is empty or holds a space', async () => {
  writeSecrets('two words', 'staging-secret-0123456789abcdef');
  const run = runScript();
  server = run.child;
  expect(await run.exited).toBe(1);
  expect(run.stderr()).toContain(`${dir}/prod_redis_password must hold one password without spaces`);

  writeSecrets('prod-secret-0123456789abcdef', '');
  const again = runScript();
  server = again.child;
  expect(await again.exited).toBe(1);
  expect(again.stderr()).toContain(`${dir}/staging_redis_password must hold one password without spaces`);
});
