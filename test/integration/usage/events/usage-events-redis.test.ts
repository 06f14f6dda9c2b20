import { startMain, isolatedEnv, twoWorkersEnv, type MainProcess } from '../../startup/startup-kit';
import { uniqueNamespace, testRedisUrl } from '../../../support/test-redis';
import { startTestProduct, type ProductHarness } from '../../../support/product-harness';
import { UsageSink, type SinkMode } from '../../../support/usage-sink';
import { eventually } from '../../../support/eventually';
import {
  awayFromMidnight,
  configFile,
  COSTS,
  createKeys,
  expectSinkMatchesExport,
  GRACE_SECONDS,
  nextPeriod,
  PERIOD_SECONDS,
  PERIODS,
  send,
  usageEventsBlock,
  type Admin,
} from './usage-events-kit';

/**
 * Issue 53 item 3 on Redis: usage events from 2 instances (one with WORKERS=2) and a third killed
 * (SIGKILL) mid-period, 20 keys in 5 consumers, 10 periods of traffic with costs, the sink down for
 * 3 periods and answering 500 for another. The sink de-duplicates on (source, id) as OpenMeter
 * does; its sums equal the usage export per key and day, and each consumer's month window, exactly.
 * Periods of 2 s (the hidden usageEvents.periodSeconds) keep it to tens of seconds.
 */

jest.setTimeout(300_000);

/**
 * No bans: a banned request reads no window, so a key banned right after the kill would report the
 * day count late (docs/metering.md); the scenario keeps to what it measures.
 */
const BAN = { threshold: 100_000, windowSeconds: 60, durationSeconds: 60 };

const SIGNING_SECRET = 'test-signing-secret-that-is-long-enough-0123456789';
const sink = new UsageSink();
const namespace = uniqueNamespace('usage-events');
let a: ProductHarness;
const spawned: MainProcess[] = [];

afterAll(async () => {
  for (const p of spawned) p.child.kill('SIGKILL');
  await a?.close();
  await sink.close();
});

/** The sink's answer during each period of traffic: down for periods 4 to 6, 500 in period 7. */
function sinkModeIn(period: number): SinkMode {
  if (period >= 4 && period <= 6) return 'down';
  return period === 7 ? 'error' : 'up';
}

test('the sink sums, after de-duplication, what the usage export and the month windows count: outage, 500s and a SIGKILL included', async () => {
  await sink.start();
  const usageEvents = usageEventsBlock(sink.url, 'scenario-redis');
  a = await startTestProduct({
    namespace,
    overrides: { costs: COSTS, ban: BAN, usageEvents, redis: { commandTimeoutMs: 10_000 } },
  });
  const file = configFile({ redis: { namespace, commandTimeoutMs: 10_000 }, costs: COSTS, ban: BAN, usageEvents });
  const common = { CONFIG_FILE: file, HOST: '127.0.0.1', INVENTORY_URL: a.inventory!.url, SIGNING_SECRET };
  // Development, as A: the same key prefix (staging's differs), so A's keys are B's too.
  const bEnv = await twoWorkersEnv(testRedisUrl(), { ...common, APP_ENV: 'development' });
  const cEnv = await isolatedEnv({
    ...common,
    REDIS_URL: testRedisUrl(),
    ADMIN_TOKEN: 'doomed-instance-admin-token-0123456789abcdef',
  });
  const b = startMain(bEnv);
  const c = startMain(cEnv);
  spawned.push(b, c);
  await Promise.all([b.waitForStdout(/is ready on/), c.waitForStdout(/is ready on/)]);

  const admin: Admin = { url: a.adminUrl, token: a.adminToken };
  const { consumers, keys } = await createKeys(admin);
  const gateways = [a.gatewayUrl, `http://127.0.0.1:${bEnv.PORT}`, `http://127.0.0.1:${cEnv.PORT}`];
  await awayFromMidnight();
  const statuses = new Map<number, number>();
  await nextPeriod();
  for (let period = 0; period < PERIODS; period++) {
    sink.mode = sinkModeIn(period);
    for (const [j, k] of keys.entries()) {
      // Mid-period 5, halfway through the keys: the third instance dies with whatever it had not flushed.
      if (period === 5 && j === keys.length / 2) {
        c.child.kill('SIGKILL');
        await c.exited;
        gateways.pop();
      }
      const gateway = gateways[(period + j) % gateways.length]!;
      const requests: Array<'GET' | 'POST'> =
        j % 4 === 0 ? ['GET', 'GET', 'GET', 'GET'] : j % 3 === 0 ? ['GET', 'POST'] : ['POST'];
      for (const method of requests) {
        const status = await send(gateway, k.key, method);
        statuses.set(status, (statuses.get(status) ?? 0) + 1);
      }
    }
    await nextPeriod();
  }
  sink.mode = 'up';
  // The traffic had both answers: costs admitted, and the small minute limits refusing.
  expect([...statuses.keys()].sort()).toEqual([200, 201, 429]);
  // Both kinds of refusal reached the gateway's sender.
  expect(sink.answered.dropped).toBeGreaterThan(0);
  expect(sink.answered.error).toBeGreaterThan(0);

  await expectSinkMatchesExport(sink, admin, consumers);
  // Each event arrived once its period had closed (its end plus the grace).
  for (const [name, event] of sink.events) {
    const end = Date.parse(event.time!) + PERIOD_SECONDS * 1000;
    expect({ name, early: sink.firstSeenAt.get(name)! < end + GRACE_SECONDS * 1000 }).toEqual({ name, early: false });
  }
  // What the instance saw of the outage, and an outbox left empty.
  await eventually(async () => /gateway_usage_events_outbox_events 0\b/.test(await metricsOf(a)), {
    timeoutMs: 20_000,
    what: 'the usage outbox is empty',
  });
  expect(await metricsOf(a)).toMatch(/gateway_usage_events_total\{result="success"\} [1-9]/);
});

async function metricsOf(product: ProductHarness): Promise<string> {
  const res = await fetch(`${product.adminUrl}/metrics`, {
    headers: { authorization: `Bearer ${product.adminToken}` },
  });
  return res.text();
}
