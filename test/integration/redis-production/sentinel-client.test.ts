import type Redis from 'ioredis';
import { connectRedis, duplicateForSubscribe } from '../../../src/shared/redis/redis';
import { startSentinelSetup, type SentinelSetup } from '../../support/redis-sentinel';
import { eventually } from '../../support/eventually';

/**
 * The gateway's Sentinel client (src/shared/redis/sentinel-client.ts) on real processes: a disconnect
 * that reaches it while it asks the sentinels for the primary (what ioredis's failover detector
 * does when `+switch-master` arrives then) does not end it for good, and after a promotion the
 * command connection and a duplicate are both back on the new primary.
 */

let setup: SentinelSetup;
const opened: Redis[] = [];

async function sentinelClient(): Promise<Redis> {
  const client = (await connectRedis({
    url: null,
    clusterNodes: [],
    commandTimeoutMs: 2000,
    sentinels: setup.sentinels,
    sentinelName: setup.name,
  })) as Redis;
  client.on('error', () => {});
  opened.push(client);
  return client;
}

/** The next `connecting` of `client`: its attempt is then asking the sentinels (no stream of its own yet). */
function nextAttempt(client: Redis): Promise<void> {
  return new Promise((resolve) => client.once('connecting', () => resolve()));
}

beforeAll(async () => {
  setup = await startSentinelSetup();
  // A hang guard above the setup's own (120 s for the sentinels, besides each Redis's start).
}, 180_000);

afterAll(async () => {
  for (const client of opened) client.disconnect();
  await setup?.stop();
});

test('a disconnect during an attempt to find the primary is one more attempt, not the end', async () => {
  const client = await sentinelClient();
  const attempt = nextAttempt(client);
  // A disconnect that asks for a reconnect, then another while that reconnect asks the sentinels:
  // the failover detector's disconnect on +switch-master, at the moment a loaded machine makes likely.
  client.disconnect(true);
  await attempt;
  let ends = 0;
  client.on('end', () => ends++);
  const aborted = new Promise<void>((resolve) =>
    client.on('error', (err: Error) => err.message === 'Connection is closed.' && resolve()),
  );
  client.disconnect(true);
  // The attempt gives up ("Connection is closed."); plain ioredis 6 then ends the client for good.
  await aborted;
  // Hang guard: the retry comes after retryStrategy's delay (at most 1 s).
  await eventually(() => client.status === 'ready', {
    timeoutMs: 30_000,
    what: () => `the client back (status ${client.status})`,
  });
  expect(await client.set('sentinel-client:after-abort', '1')).toBe('OK');
  // Its owners were not told it ended: to the stores' subscribers that means "replace me".
  expect(ends).toBe(0);
}, 60_000);

test('closed by its owner during an attempt, it stays closed', async () => {
  const client = await sentinelClient();
  const attempt = nextAttempt(client);
  client.disconnect(true);
  await attempt;
  const ended = new Promise<void>((resolve) => client.once('end', () => resolve()));
  client.disconnect();
  await ended;
  let reconnected = false;
  client.on('connecting', () => (reconnected = true));
  // Twice retryStrategy's longest delay (1 s): the premise of "no retry follows".
  await new Promise((resolve) => setTimeout(resolve, 2000));
  expect([client.status, reconnected]).toEqual(['end', false]);
});

test('after a promotion, the command connection and a duplicate both write on the new primary', async () => {
  const client = await sentinelClient();
  const subscriber = (await duplicateForSubscribe(client)) as Redis;
  opened.push(subscriber);
  const heard: string[] = [];
  await subscriber.subscribe('sentinel-client:channel');
  subscriber.on('message', (_channel, message) => heard.push(message));
  await setup.primary.stop();
  // Sentinel's election: third-party timing, a hang guard (docs/testing.md, rule 3).
  await eventually(async () => (await setup.currentPrimary()) === `127.0.0.1:${setup.replica.port}`, {
    timeoutMs: 120_000,
    what: 'the replica promoted',
  });
  const write = async () =>
    client.set('sentinel-client:after-promotion', '1').then(
      () => true,
      () => false,
    );
  await eventually(write, {
    timeoutMs: 30_000,
    what: () => `the command connection on the new primary (status ${client.status})`,
  });
  await eventually(
    async () => {
      await client.publish('sentinel-client:channel', 'after');
      return heard.includes('after');
    },
    { timeoutMs: 30_000, pollMs: 200, what: () => `the subscriber on the new primary (status ${subscriber.status})` },
  );
}, 180_000);
