import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Redis from 'ioredis';
import request from 'supertest';
import { canonicalJson } from '../../../src/shared/config';
import { startRedisServer, type RedisProcess } from '../../support/redis-server';
import { startTestProduct, type ProductHarness } from '../../support/product-harness';
import { admin, sequentially } from '../gateway/gateway-kit';
import { eventually } from '../../support/eventually';
import { WebhookReceiver } from '../../support/webhook-receiver';
import { createKey } from '../../support/keys';

/**
 * ACL LOG entries other than the startup durability check's CONFIG GET, which the ACL refuses on
 * purpose (CONFIG GET reads passwords too) and which the gateway reports as "unknown".
 */
function refusedCommands(log: unknown): unknown[] {
  return (log as unknown[][]).filter((entry) => entry[entry.indexOf('object') + 1] !== 'config|get');
}

/**
 * The whole gateway under exactly the Redis ACL the README gives (config/redis/gateway-acl.txt):
 * production and staging as two users of one Redis, each confined to its namespace's keys and
 * channels. Redis's own ACL LOG must stay empty (no command the gateway sends was refused), and the
 * staging user can neither read nor write production's keys.
 */

const ACL_RULES = fs
  .readFileSync(path.join(__dirname, '..', '..', '..', 'config', 'redis', 'gateway-acl.txt'), 'utf8')
  .trim();
const PRODUCTION = { user: 'asg-prod', password: 'prod-password-0123456789', namespace: 'asg:prod' };
const STAGING = { user: 'asg-staging', password: 'staging-password-0123456789', namespace: 'asg:staging' };

function userArgs(u: typeof PRODUCTION): string[] {
  return ['--user', u.user, 'on', `>${u.password}`, ...ACL_RULES.replaceAll('{namespace}', u.namespace).split(/\s+/)];
}

let redis: RedisProcess;
/** A replica, so that admin writes WAIT for it under the ACL too. */
let replica: RedisProcess;
let superuser: Redis;
let production: ProductHarness | null;
let receiver: WebhookReceiver;

beforeAll(async () => {
  // The default user keeps a password only this test knows: it reads the ACL LOG and looks at keys.
  redis = await startRedisServer([
    '--requirepass',
    'test-superuser-password',
    ...userArgs(PRODUCTION),
    ...userArgs(STAGING),
  ]);
  superuser = new Redis(redis.port, '127.0.0.1', { password: 'test-superuser-password' });
  replica = await startRedisServer([
    '--replicaof',
    '127.0.0.1',
    String(redis.port),
    '--masterauth',
    'test-superuser-password',
  ]);
  await eventually(async () => /^slave0:.*state=online/m.test(await superuser.info('replication')), {
    timeoutMs: 15_000,
  });
  receiver = await new WebhookReceiver().start();
  const passwordFile = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'asg-acl-')), 'redis-password');
  fs.writeFileSync(passwordFile, `${PRODUCTION.password}\n`);
  production = await startTestProduct({
    namespace: PRODUCTION.namespace,
    env: { REDIS_PASSWORD_FILE: passwordFile },
    overrides: {
      redis: { url: `redis://${PRODUCTION.user}@127.0.0.1:${redis.port}` },
      ban: { threshold: 2 },
      notifications: { webhooks: [{ url: receiver.url, secret: receiver.secret }] },
    },
  });
});

afterAll(async () => {
  await production?.close();
  await receiver?.stop();
  superuser?.disconnect();
  await replica?.stop();
  await redis?.stop();
});

describe('the gateway under the Redis ACL of docs/redis.md', () => {
  it('is the ACL docs/redis.md prints for production', () => {
    const readme = fs.readFileSync(path.join(__dirname, '..', '..', '..', 'docs', 'redis.md'), 'utf8');
    const line = readme.split('\n').find((l) => l.startsWith('user asg-prod '))!;
    expect(line.replace(/^user asg-prod\s+on\s+>PRODUCTION-PASSWORD\s+/, '').split(/\s+/)).toEqual(
      ACL_RULES.replaceAll('{namespace}', PRODUCTION.namespace).split(/\s+/),
    );
  });

  it('serves, limits, bans, revokes, counts deprecated calls and usage, and keeps the audit trail, with no command refused', async () => {
    const product = production!;
    const { id, auth } = await createKey(product, { plan: 'free', limits: { perMinute: 3, perDay: 100 } });
    const statuses = (
      await sequentially(7, () => request(product.gatewayUrl).get('/v1/pets').set('Authorization', auth))
    ).map((r) => r.status);
    expect(statuses).toEqual([200, 200, 200, 429, 429, 429, 429]);
    expect((await request(product.gatewayUrl).get('/v1/pets').set('Authorization', auth)).body.code).toBe(
      'temporarily_banned',
    );
    const unban = await admin(product).delete(`/admin/keys/${id}/ban`).expect(204);
    // The write waited for the replica (SET of the probe, WAIT) under the ACL.
    expect(unban.headers['x-replicated']).toBe('true');
    const second = await createKey(product, { plan: 'pro' });
    expect((await request(product.gatewayUrl).get('/v1/pets/1').set('Authorization', second.auth)).status).toBe(404);
    expect(
      (await request(product.gatewayUrl).get('/v1/pets').set('Authorization', 'Bearer asg_dev_unknown')).status,
    ).toBe(401);
    await admin(product).delete(`/admin/keys/${second.id}`).expect(204);
    expect((await request(product.gatewayUrl).get('/v1/pets').set('Authorization', second.auth)).body.code).toBe(
      'revoked_api_key',
    );
    await request(product.adminUrl).get('/readyz').expect(200);
    await request(product.adminUrl).get('/metrics').expect(200);
    await admin(product).get('/admin/audit').expect(200);
    await admin(product).get(`/admin/keys/${id}/usage`).expect(200);
    await admin(product).get('/admin/deprecations').expect(200);
    // A consumer's delete closes it to keys in the key store first (hash commands under the ACL too).
    const post = (path: string, body: object) =>
      request(product.adminUrl).post(path).set('Authorization', `Bearer ${product.adminToken}`).send(body);
    const consumer = await post('/admin/consumers', { name: 'acl' }).expect(201);
    const ofConsumer = await post('/admin/keys', { name: 'acl', plan: 'pro', consumerId: consumer.body.id }).expect(
      201,
    );
    await admin(product).delete(`/admin/consumers/${consumer.body.id}`).expect(409);
    await admin(product).delete(`/admin/keys/${ofConsumer.body.id}`).expect(204);
    await admin(product).delete(`/admin/consumers/${consumer.body.id}`).expect(204);
    await post('/admin/keys', { name: 'late', plan: 'pro', consumerId: consumer.body.id }).expect(400);
    // Webhooks through the outbox (the ban above was one, the two revocations two (key.revoked); a
    // day limit of 1 passes 80, 90 and 100 % at once).
    const metered = await createKey(product, { plan: 'free', limits: { perMinute: 10, perDay: 1 } });
    expect((await request(product.gatewayUrl).get('/v1/pets').set('Authorization', metered.auth)).status).toBe(200);
    await eventually(() => receiver.deliveredIds().length === 6, { what: 'six webhooks delivered', timeoutMs: 20_000 });
    // The busiest keys and the usage export.
    await admin(product).get('/admin/stats/top-keys?minutes=60').expect(200);
    const today = new Date().toISOString().slice(0, 10);
    await admin(product).get(`/admin/usage/export?from=${today}&to=${today}`).expect(200);
    // Closing flushes what is batched off the request path (usage, last use, deprecated callers).
    production = null;
    await product.close();

    expect(refusedCommands(await superuser.call('ACL', 'LOG'))).toEqual([]);
    expect(await superuser.keys(`${PRODUCTION.namespace}:*usage*`)).not.toEqual([]);
    const keys = (await superuser.keys('*')) as string[];
    expect(keys.length).toBeGreaterThan(0);
    expect(keys.filter((key) => !key.startsWith(`${PRODUCTION.namespace}:`))).toEqual([]);
  });

  it("the staging user can neither read nor write production's keys, nor hear its channel", async () => {
    const staging = new Redis(redis.port, '127.0.0.1', {
      username: STAGING.user,
      password: STAGING.password,
      maxRetriesPerRequest: 0,
    });
    try {
      const productionKey = ((await superuser.keys(`${PRODUCTION.namespace}:*`)) as string[])[0]!;
      await expect(staging.hgetall(productionKey)).rejects.toThrow(/NOPERM/);
      await expect(staging.hset(productionKey, 'x', '1')).rejects.toThrow(/NOPERM/);
      await expect(staging.publish(`${PRODUCTION.namespace}:key-changes`, 'forged')).rejects.toThrow(/NOPERM/);
      // Its own namespace is open to it.
      expect(await staging.hset(`${STAGING.namespace}:probe`, 'x', '1')).toBe(1);
    } finally {
      staging.disconnect();
    }
  });

  it('a password inside REDIS_URL: redacted by GET /admin/config, and kept out of gateway_config_info{hash} on the unauthenticated /metrics (issue 42)', async () => {
    const product = await startTestProduct({
      namespace: PRODUCTION.namespace,
      overrides: { redis: { url: `redis://${PRODUCTION.user}:${PRODUCTION.password}@127.0.0.1:${redis.port}/0` } },
    });
    try {
      const shown = (await admin(product).get('/admin/config').expect(200)).body as {
        hash: string;
        config: { redis: { url: string } };
      };
      expect(shown.config.redis.url).toBe(`redis://${PRODUCTION.user}:[redacted]@127.0.0.1:${redis.port}/0`);
      expect(JSON.stringify(shown)).not.toContain(PRODUCTION.password);
      // The hash anyone can scrape is the sha256 of what the token holder sees: nothing to test guesses against.
      expect(shown.hash).toBe(createHash('sha256').update(canonicalJson(shown.config)).digest('hex'));
      const metrics = (await request(product.adminUrl).get('/metrics').expect(200)).text;
      expect(metrics).toContain(`gateway_config_info{hash="${shown.hash}"} 1`);
      expect(metrics).not.toContain(PRODUCTION.password);
    } finally {
      await product.close();
    }
  });

  it('a wrong password stops startup with one line naming the settings to check', async () => {
    await expect(
      startTestProduct({
        namespace: PRODUCTION.namespace,
        env: { REDIS_PASSWORD: 'wrong' },
        overrides: { redis: { url: `redis://${PRODUCTION.user}@127.0.0.1:${redis.port}` } },
      }),
    ).rejects.toThrow(
      /^Redis refused the user or password \(WRONGPASS\); check the user in REDIS_URL or REDIS_USERNAME, and REDIS_PASSWORD$/,
    );
  });

  it('a password changed after startup is an outage like any other: the fail mode serves, /readyz says so, and the gateway returns by itself', async () => {
    const product = await startTestProduct({
      namespace: PRODUCTION.namespace,
      env: { REDIS_PASSWORD: PRODUCTION.password },
      overrides: { redis: { url: `redis://${PRODUCTION.user}@127.0.0.1:${redis.port}` }, store: { failMode: 'local' } },
    });
    try {
      const { auth } = await createKey(product, { plan: 'pro' });
      await request(product.gatewayUrl).get('/v1/pets').set('Authorization', auth).expect(200);
      // The operator rotates the password on Redis before the gateway's secret, and connections drop.
      await superuser.call('ACL', 'SETUSER', PRODUCTION.user, 'resetpass', '>rotated-password-0123456789');
      await superuser.call('CLIENT', 'KILL', 'USER', PRODUCTION.user);
      // /readyz stays 200 for a shared store's fault (CONTRACT §5) and names it in its body.
      await eventually(async () => {
        const ready = await request(product.adminUrl).get('/readyz');
        return ready.status === 200 && ready.body.status === 'degraded';
      });
      const during = await sequentially(5, () =>
        request(product.gatewayUrl).get('/v1/pets').set('Authorization', auth),
      );
      expect(during.map((r) => r.status)).toEqual([200, 200, 200, 200, 200]);
      expect(/^gateway_store_degraded 1$/m.test((await request(product.adminUrl).get('/metrics')).text)).toBe(true);
      // The old password is valid again: the reconnect loop gets in without a restart.
      await superuser.call('ACL', 'SETUSER', PRODUCTION.user, `>${PRODUCTION.password}`);
      await eventually(async () => (await request(product.adminUrl).get('/readyz')).body.status === 'ready');
      await request(product.gatewayUrl).get('/v1/pets').set('Authorization', auth).expect(200);
    } finally {
      await product.close();
      await superuser.call('ACL', 'SETUSER', PRODUCTION.user, 'resetpass', `>${PRODUCTION.password}`);
    }
  });
});
