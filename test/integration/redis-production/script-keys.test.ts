import { createHash, randomBytes } from 'node:crypto';
import net from 'node:net';
import Redis from 'ioredis';
import request from 'supertest';
import { definedLuaScripts } from '../../../src/shared/redis/lua-script';
import { connectRedis, type RedisClient } from '../../../src/shared/redis/redis';
import { RedisKeyStore } from '../../../src/keys/stores/redis-key-store';
import { RedisConsumerStore } from '../../../src/consumers/redis-consumer-store';
import { RedisOutbox } from '../../../src/notifications/redis-outbox';
import { RedisKeyLimiter } from '../../../src/limits/redis/redis-key-limiter';
import { RedisSentStateStore } from '../../../src/usage/events/redis-sent-state';
import { RedisKeyActivityStore } from '../../../src/usage/redis-key-activity-store';
import { useRedisPerFile } from '../../support/redis-per-file';
import { startTestProduct, type ProductHarness } from '../../support/product-harness';
import { eventually } from '../../support/eventually';
import { WebhookReceiver } from '../../support/webhook-receiver';
import { NO_BAN } from '../../unit/limits/minute-window-behaviours';

/**
 * Every Lua script of the product names in KEYS[] each key it touches (docs/redis.md). Redis asks
 * this of scripts, a Cluster needs it to route them, and servers that enforce it (Dragonfly, by
 * default) refuse an undeclared key. The test runs every script defined with defineLuaScript on a
 * redis-server of its own, driven through two products (a fixed and a sliding minute) and, for the
 * few paths a product only takes after a failure, through the stores themselves, while a MONITOR
 * connection records each command: a command a script issues shows as `lua` right after the
 * EVALSHA (or EVAL) that ran it, whose KEYS are the declared ones. Redis itself names the keys of
 * each command (COMMAND GETKEYS), so the test needs no list of commands.
 */
jest.setTimeout(180_000);

interface Monitored {
  source: string;
  /** Each argument's bytes as Redis received them. */
  raw: Buffer[];
  args: string[];
}

const ESCAPES: Record<string, number> = { n: 10, r: 13, t: 9, a: 7, b: 8, '\\': 92, '"': 34 };

/**
 * One MONITOR line, `+<time> [<db> <source>] "arg" "arg" …`, its arguments unescaped as Redis
 * escaped them (sdscatrepr: \\, \", \n, \r, \t, \a, \b and \xHH): the bytes that were sent.
 */
function parseMonitorLine(line: string): Monitored | null {
  const head = /^\+\d+\.\d+ \[\d+ ([^\]]+)\] /.exec(line);
  if (!head) return null;
  const raw: Buffer[] = [];
  let bytes: number[] | null = null;
  for (let i = head[0].length; i < line.length; i++) {
    const c = line[i]!;
    if (bytes === null) {
      if (c === '"') bytes = [];
      continue;
    }
    if (c === '"') {
      raw.push(Buffer.from(bytes));
      bytes = null;
    } else if (c === '\\') {
      const next = line[++i]!;
      if (next === 'x') {
        bytes.push(parseInt(line.slice(i + 1, i + 3), 16));
        i += 2;
      } else bytes.push(ESCAPES[next]!);
    } else bytes.push(...Buffer.from(c, 'latin1'));
  }
  return { source: head[1]!, raw, args: raw.map((b) => b.toString('utf8')) };
}

/** A MONITOR connection of its own (ioredis's parse of a monitor line is lossy): every command Redis runs from now on. */
async function startMonitor(port: number, onLine: (m: Monitored) => void): Promise<net.Socket> {
  const socket = net.connect(port, '127.0.0.1');
  await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  let pending = '';
  socket.setEncoding('latin1');
  const started = new Promise<void>((resolve) => {
    socket.on('data', (chunk: string) => {
      pending += chunk;
      const lines = pending.split('\r\n');
      pending = lines.pop()!;
      for (const line of lines) {
        if (line === '+OK') resolve();
        const parsed = parseMonitorLine(line);
        if (parsed) onLine(parsed);
      }
    });
  });
  socket.write('MONITOR\r\n');
  await started;
  return socket;
}

const redis = useRedisPerFile();
let monitor: net.Socket;
let observer: Redis;
const monitored: Monitored[] = [];
let receiver: WebhookReceiver;
let fixed: ProductHarness | null = null;
let sliding: ProductHarness | null = null;
let client: RedisClient;

beforeAll(async () => {
  observer = new Redis(redis.port, '127.0.0.1');
  monitor = await startMonitor(redis.port, (m) => monitored.push(m));
  receiver = await new WebhookReceiver().start();
  // The first delivery fails, so that one is rescheduled; every other is taken.
  receiver.behaviour = (n) => (n === 0 ? 500 : 200);
  client = await connectRedis({ url: redis.url, clusterNodes: [], commandTimeoutMs: 5000 });
});

afterAll(async () => {
  await sliding?.close();
  await fixed?.close();
  await client?.quit();
  await receiver?.stop();
  monitor?.destroy();
  observer?.disconnect();
});

const adminOf = (product: ProductHarness) => ({
  post: (path: string, body: object) =>
    request(product.adminUrl).post(path).set('Authorization', `Bearer ${product.adminToken}`).send(body),
  patch: (path: string, body: object) =>
    request(product.adminUrl).patch(path).set('Authorization', `Bearer ${product.adminToken}`).send(body),
  get: (path: string) => request(product.adminUrl).get(path).set('Authorization', `Bearer ${product.adminToken}`),
  delete: (path: string) => request(product.adminUrl).delete(path).set('Authorization', `Bearer ${product.adminToken}`),
});

/** Requests, admin writes of keys and consumers, credits, resets, moves, webhooks, an import and an export. */
async function driveProduct(product: ProductHarness, webhooks: boolean): Promise<void> {
  const admin = adminOf(product);
  const get = (key: string) =>
    request(product.gatewayUrl).get('/v1/pets?limit=1').set('Authorization', `Bearer ${key}`);
  const own = (
    await admin
      .post('/admin/keys', {
        name: 'own',
        plan: 'enterprise',
        limits: { perMinute: 2, perDay: webhooks ? 1 : 100, perMonth: 1000 },
      })
      .expect(201)
  ).body as { id: string; key: string };
  await get(own.key).expect(200);
  await get(own.key);
  await admin.post(`/admin/keys/${own.id}/credits`, { units: 5 }).expect(200);
  await admin.post(`/admin/keys/${own.id}/windows/reset`, { windows: ['minute', 'day', 'month'] }).expect(200);
  await admin.patch(`/admin/keys/${own.id}`, { name: 'renamed' }).expect(200);
  await admin.post(`/admin/keys/${own.id}/rotate`, { graceSeconds: 60 }).expect(201);
  await admin.get(`/admin/keys/${own.id}`).expect(200);
  await admin.delete(`/admin/keys/${own.id}/ban`).expect(204);

  const consumer = (
    await admin
      .post('/admin/consumers', { name: 'shared', limits: { perMinute: 50, perDay: 500, perMonth: 5000 } })
      .expect(201)
  ).body as { id: string };
  const other = (await admin.post('/admin/consumers', { name: 'other', limits: { perMinute: 50 } }).expect(201))
    .body as { id: string };
  const member = (await admin.post('/admin/keys', { name: 'member', plan: 'pro', consumerId: consumer.id }).expect(201))
    .body as { id: string; key: string };
  await get(member.key).expect(200);
  await admin.get(`/admin/consumers/${consumer.id}`).expect(200);
  await admin.post(`/admin/consumers/${consumer.id}/credits`, { units: 5 }).expect(200);
  await admin
    .post(`/admin/consumers/${consumer.id}/windows/reset`, { windows: ['minute', 'day', 'month'] })
    .expect(200);
  // Moves the key's windows to the other consumer's slot, then deletes the first consumer (closed, then gone).
  await admin.patch(`/admin/keys/${member.id}`, { consumerId: other.id }).expect(200);
  await admin.delete(`/admin/consumers/${consumer.id}`).expect(204);
  await admin.get('/admin/stats/top-keys?minutes=60').expect(200);

  // A backup and its import: every record written again (a name changed), one batch of the import script.
  const exported = await admin.get('/admin/keys/export').expect(200);
  const renamed = exported.text
    .split('\n')
    .filter(Boolean)
    .map((line) => line.replace('"name":"member"', '"name":"member again"'));
  await request(product.adminUrl)
    .post('/admin/keys/import')
    .set('Authorization', `Bearer ${product.adminToken}`)
    .set('Content-Type', 'application/x-ndjson')
    .send(renamed.join('\n') + '\n')
    .expect(200);
  await admin.delete(`/admin/keys/${member.id}`).expect(204);
}

/** The paths no product takes unless something failed: an import undone, records restored after a loss, the restore lock, the outbox's release. */
/** Leases of units (src/limits/leases/): the lease consume with a return carried, and the return alone, for a key and a consumer's key. */
async function driveLeases(namespace: string): Promise<void> {
  const limiter = new RedisKeyLimiter(client, { namespace, ban: NO_BAN });
  const limits = { perMinute: 10_000, perDay: 100_000, perMonth: 1_000_000 };
  const consumer = {
    id: 'con_leases',
    limits: { perMinute: 10_000, perDay: 100_000, perMonth: 1_000_000 },
    billingDay: 1,
  };
  for (const [key, options] of [
    [{ keyId: 'key_leases' }, {}],
    [{ keyId: 'key_leases', consumerId: consumer.id }, { consumer }],
  ] as const) {
    const { grant } = await limiter.consumeWithLease(key, limits, options, 100, null);
    expect(grant?.units).toBe(100);
    const back = {
      holder: key,
      units: 50,
      windows: grant!.windows,
      complete: true,
      takenAt: grant!.storeNow,
      granted: 100,
      inConsumerWindows: 'consumerId' in key,
    };
    expect((await limiter.consumeWithLease(key, limits, options, 0, back)).returned).toBe(true);
    expect(await limiter.returnUnits([{ ...back, units: 10 }])).toEqual([true]);
  }
}

async function driveStoresDirectly(namespace: string): Promise<void> {
  const store = await RedisKeyStore.open(client, { namespace });
  try {
    const records = await store.list();
    expect(records.length).toBeGreaterThanOrEqual(2);
    // The second batch of an import holds a hash another key holds: the first batch is undone.
    const batch = Array.from({ length: 251 }, (_, i) => ({
      ...records[0]!,
      id: `key_${randomBytes(12).toString('hex')}`,
      hash: createHash('sha256').update(`import ${i}`).digest('hex'),
      previousHash: null,
    }));
    batch[250] = { ...batch[250]!, hash: records[1]!.hash };
    await expect(store.importRecords(batch)).rejects.toThrow();
    await store.restoreMissing([
      {
        ...records[0]!,
        id: `key_${randomBytes(12).toString('hex')}`,
        hash: createHash('sha256').update('restored').digest('hex'),
        previousHash: null,
      },
    ]);
    await store.health();
    expect(await store.lockRestore('script-keys', 10_000)).toBe(true);
    await store.unlockRestore('script-keys');
    await store.issuedMark({ countHashes: true });
    await store.scanIssuedHashes(() => {});
    await store.getMany(records.map((r) => r.id));
  } finally {
    await store.close();
  }
  // The consumers' side of the same loss check: a consumer written back after a loss.
  const consumers = await RedisConsumerStore.open(client, namespace);
  try {
    const [first] = await consumers.list();
    expect(await consumers.restoreMissing([{ ...first!, id: `con_${randomBytes(12).toString('hex')}` }])).toHaveLength(
      1,
    );
    expect(await consumers.lockRestore('script-keys', 10_000)).toBe(true);
    await consumers.unlockRestore('script-keys');
  } finally {
    await consumers.close();
  }
  const outbox = new RedisOutbox(client, namespace);
  await outbox.add(
    [
      {
        id: 'evt_direct',
        type: 'key.revoked',
        body: '{}',
        createdAt: Date.now(),
        seenUntil: Date.now() + 60_000,
        endpoints: ['https://a.example/hook'],
      },
    ],
    Date.now(),
    1,
  );
  const [claimed] = await outbox.claim('https://a.example/hook', 1, Date.now(), Date.now() + 30_000);
  await outbox.release(claimed!, Date.now());
  // Another instance (which has heard of no receiver) adds a second event over a bound of one: the
  // oldest is dropped, from the due set of an endpoint it learns of from the script's first answer.
  const another = new RedisOutbox(client, namespace);
  expect(
    await another.add(
      [
        {
          id: 'evt_direct_2',
          type: 'key.banned',
          body: '{}',
          createdAt: Date.now() + 1,
          seenUntil: Date.now() + 60_000,
          endpoints: ['https://b.example/hook'],
        },
      ],
      Date.now(),
      1,
    ),
  ).toEqual(['key.revoked']);
  await new RedisOutbox(client, namespace).keepReceivers('script-keys', [], Date.now(), Date.now() + 60_000, 1000);
  // Usage events (src/usage/events, off unless configured): a key-day's sent state, the closer's lease, the touched set.
  const sent = new RedisSentStateStore(client, namespace);
  expect(await sent.write('key_usage_events', 60_000, 1, 0, { periods: new Map(), pending: [] })).toBe(true);
  expect(await sent.lease('script-keys', Date.now(), 10_000)).toBe(true);
  await new RedisKeyActivityStore(client, namespace).untouch({
    periodMs: 60_000,
    day: 1,
    keyId: 'key_usage_events',
    mark: Date.now(),
  });
}

/** A sliding limiter of its own for what a product with a sliding minute runs only now and then. */
async function driveSlidingLimiter(namespace: string): Promise<void> {
  const limiter = new RedisKeyLimiter(client, { namespace, ban: NO_BAN, minuteWindow: 'sliding' });
  const consumer = { id: 'con_' + '5'.repeat(24), limits: { perMinute: 10, perDay: 10, perMonth: 10 }, billingDay: 1 };
  const key = { keyId: 'key_sliding', consumerId: consumer.id };
  await limiter.consume(key, { perMinute: 10, perDay: 10 }, { consumer });
  await limiter.usage(key, { perMinute: 10, perDay: 10 });
  await limiter.consumerUsage(consumer);
  await limiter.moveWindows(key, { keyId: 'key_sliding' });
  await limiter.close();
}

interface ScriptCall {
  name: string;
  declared: Set<string>;
  commands: string[][];
}

/** The calls of scripts in the MONITOR stream, each with the commands it issued. */
function scriptCalls(lines: readonly Monitored[]): ScriptCall[] {
  const bySha = new Map(definedLuaScripts().map((s) => [createHash('sha1').update(s.source).digest('hex'), s.name]));
  const calls: ScriptCall[] = [];
  let current: ScriptCall | null = null;
  for (const { source, args, raw } of lines) {
    if (source === 'lua') {
      if (current === null) throw new Error(`a command from Lua with no script before it: ${args.join(' ')}`);
      current.commands.push(args);
      continue;
    }
    const verb = args[0]!.toLowerCase();
    if (verb !== 'evalsha' && verb !== 'eval') {
      current = null;
      continue;
    }
    const sha = verb === 'eval' ? createHash('sha1').update(raw[1]!).digest('hex') : args[1]!;
    const numberOfKeys = Number(args[2]);
    current = {
      name: bySha.get(sha) ?? `unknown script ${sha}`,
      declared: new Set(args.slice(3, 3 + numberOfKeys)),
      commands: [],
    };
    calls.push(current);
  }
  return calls;
}

/** The keys of one command, as Redis names them; none for commands without keys (TIME, PUBLISH). */
async function keysOf(command: string[]): Promise<string[]> {
  if (command[0]!.toUpperCase() === 'TIME') return [];
  try {
    return (await observer.call('COMMAND', 'GETKEYS', ...command)) as string[];
  } catch (err) {
    if (/has no key arguments/.test((err as Error).message)) return [];
    throw err;
  }
}

test('every script declares in KEYS each key it touches, and every script the product defines ran', async () => {
  fixed = await startTestProduct({
    redisUrl: redis.url,
    overrides: { ban: { threshold: 1 }, notifications: { webhooks: [{ url: receiver.url, secret: receiver.secret }] } },
  });
  await driveProduct(fixed, true);
  // The day limit of 1 passed 80, 90 and 100 % (three events) and the ban a fourth: the first failed and was rescheduled.
  await eventually(() => receiver.deliveredIds().length >= 4, { what: 'four webhooks delivered', timeoutMs: 60_000 });
  sliding = await startTestProduct({ redisUrl: redis.url, overrides: { rateLimit: { minuteWindow: 'sliding' } } });
  await driveProduct(sliding, false);
  const namespace = fixed.config.redis.namespace;
  await driveStoresDirectly(namespace);
  await driveLeases(namespace);
  await driveSlidingLimiter(namespace);
  await sliding.close();
  await fixed.close();
  [sliding, fixed] = [null, null];

  // Everything sent has reached the monitor once a marker sent after it has.
  const marker = `script-keys-${randomBytes(4).toString('hex')}`;
  await observer.echo(marker);
  await eventually(() => monitored.some((m) => m.args[0]?.toLowerCase() === 'echo' && m.args[1] === marker), {
    timeoutMs: 30_000,
    what: 'the monitor to catch up',
  });

  const calls = scriptCalls(monitored);
  const undeclared = new Set<string>();
  const keyCache = new Map<string, string[]>();
  for (const call of calls) {
    for (const command of call.commands) {
      const line = JSON.stringify(command);
      let keys = keyCache.get(line);
      if (keys === undefined) keyCache.set(line, (keys = await keysOf(command)));
      for (const key of keys) if (!call.declared.has(key)) undeclared.add(`${call.name}: ${command[0]} ${key}`);
    }
  }
  expect([...undeclared].sort()).toEqual([]);
  const ran = new Set(calls.map((c) => c.name));
  expect(
    definedLuaScripts()
      .map((s) => s.name)
      .filter((name) => !ran.has(name))
      .sort(),
  ).toEqual([]);
  expect([...ran].filter((name) => name.startsWith('unknown script'))).toEqual([]);
});
