import { eventually } from '../../support/eventually';
import { LONG_ADMIN_TOKEN } from '../startup/startup-kit';
import { GatewayInstance, harnessConfigYaml, PersistentRedis } from './fleet-kit';
import { LoadClients, type ClientPlan } from './load-clients';
import { harnessSeed, seededRandom, shuffled } from './seeded-order';
import { WindowTally } from './window-tally';

/**
 * The invariant of leases (issue 50, CONTRACT §4 "Leases"): no window ever admits more than its
 * limit, through faults. Three gateway instances as real processes (one WORKERS=2) on one Redis
 * of the test's own, a key and a consumer's two keys with limits the clients exceed, clients
 * hammering every instance at a bounded rate, and mid-run, in a seeded order: an instance
 * SIGKILLed and restarted, a worker SIGKILLed, a SIGHUP reload, Redis paused (failMode: closed)
 * and Redis restarted with its data. Counted from the clients' side, per window as the gateway
 * named it. Runs on the per-request path today and unchanged once leases land.
 */

jest.setTimeout(180_000);

/** One operation costs this many units (config `costs`), so windows count costs, not requests. */
const PET_COST = 3;
/** Units per minute of each limit, by tally name; day limits far above what the run sends, so the minutes are the tightest. */
const LIMITS = { 'key:solo': 90, 'key:shared-list': 100, 'key:shared-pet': 99, 'consumer:shared': 120 } as const;
const PER_DAY = 1_000_000;
/** Traffic between two faults, and after the last. */
const GAP_MS = 2_500;

type Fault = 'kill-instance' | 'kill-worker' | 'reload' | 'pause-redis' | 'restart-redis';
const FAULTS: readonly Fault[] = ['kill-instance', 'kill-worker', 'reload', 'pause-redis', 'restart-redis'];

let redis: PersistentRedis;
let instances: GatewayInstance[];
/** Instances the clients may reach now (a killed one stays listed: its errors are part of the run). */
const targets = () => instances.map((instance) => instance.gatewayUrl);

beforeAll(async () => {
  redis = await PersistentRedis.start();
  const settings = {
    redisUrl: redis.url,
    configYaml: harnessConfigYaml(`asg:leases:${process.pid}:${Date.now()}`, PET_COST),
  };
  instances = await Promise.all([
    GatewayInstance.started('one', 1, settings),
    GatewayInstance.started('two-workers', 2, settings),
    GatewayInstance.started('three', 1, settings),
  ]);
  trace('instances started');
});

afterAll(async () => {
  trace('stopping');
  await Promise.all((instances ?? []).map((instance) => instance.stop()));
  await redis?.stop();
});

async function admin(path: string, body: unknown): Promise<Record<string, unknown>> {
  const res = await fetch(`${instances[0]!.adminUrl}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${LONG_ADMIN_TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  if (res.status !== 201) {
    const log = instances[0]!.stdout().split('\n').slice(-5).join('\n');
    throw new Error(`POST ${path} answered ${res.status}: ${text}\n${log}`);
  }
  return JSON.parse(text) as Record<string, unknown>;
}

async function newKey(name: string, perMinute: number, consumerId?: string): Promise<string> {
  const limits = { perMinute, perDay: PER_DAY };
  const created = await admin('/admin/keys', { name, plan: 'enterprise', limits, consumerId });
  return `Bearer ${String(created.key)}`;
}

/** The key, and the consumer's two keys (one listing pets at cost 1, one reading a pet at PET_COST). */
async function clientPlans(): Promise<ClientPlan[]> {
  const consumer = await admin('/admin/consumers', {
    name: 'shared',
    limits: { perMinute: LIMITS['consumer:shared'] },
  });
  const consumerId = String(consumer.id);
  return [
    { auth: await newKey('solo', LIMITS['key:solo']), path: '/v1/pets', units: 1, limits: ['key:solo'], perSecond: 15 },
    {
      auth: await newKey('shared-list', LIMITS['key:shared-list'], consumerId),
      path: '/v1/pets',
      units: 1,
      limits: ['key:shared-list', 'consumer:shared'],
      perSecond: 10,
    },
    {
      auth: await newKey('shared-pet', LIMITS['key:shared-pet'], consumerId),
      path: '/v1/pets/1',
      units: PET_COST,
      limits: ['key:shared-pet', 'consumer:shared'],
      perSecond: 5,
    },
  ];
}

/** Every instance knows every key (key changes reach all within 1 s); the probes count in the tally like any request. */
async function untilAllInstancesKnowTheKeys(plans: ClientPlan[], tally: WindowTally): Promise<void> {
  for (const instance of instances)
    for (const plan of plans)
      await eventually(async () => {
        const res = await fetch(`${instance.gatewayUrl}${plan.path}`, { headers: { authorization: plan.auth } });
        await res.arrayBuffer();
        const reset = res.headers.get('x-ratelimit-reset');
        tally.record(plan.limits, plan.units, { status: res.status, resetAt: reset === null ? null : Number(reset) });
        return res.status !== 401;
      });
}

/** LEASES_HARNESS_TRACE=1: each step of the run on stderr as it happens (a hang shows where it stands). */
function trace(step: string): void {
  if (process.env.LEASES_HARNESS_TRACE) process.stderr.write(`[leases harness ${new Date().toISOString()}] ${step}\n`);
}

/** Runs one fault to its end (an instance killed is back up, Redis restarted answers). */
async function inflict(fault: Fault, random: () => number): Promise<string> {
  const single = instances.filter((instance) => instance.workers === 1);
  const workers = instances.find((instance) => instance.workers === 2)!;
  switch (fault) {
    case 'kill-instance': {
      const victim = [...single, workers][Math.floor(random() * 3)]!;
      await victim.kill();
      await victim.start();
      return `SIGKILL ${victim.name}, restarted`;
    }
    case 'kill-worker':
      return `SIGKILL worker ${workers.killWorker()} of ${workers.name}`;
    case 'reload': {
      const reloaded = instances[Math.floor(random() * instances.length)]!;
      reloaded.reload();
      return `SIGHUP ${reloaded.name}`;
    }
    case 'pause-redis':
      await redis.pause(1_500);
      return 'CLIENT PAUSE 1500';
    case 'restart-redis':
      await redis.restart();
      return 'Redis SHUTDOWN SAVE, restarted on its data';
  }
}

test('no window admits more than its limit: instances and a worker SIGKILLed, a reload, Redis paused and restarted, in a seeded order', async () => {
  const seed = harnessSeed();
  const random = seededRandom(seed);
  const tally = new WindowTally();
  const plans = await clientPlans();
  trace('keys created');
  await untilAllInstancesKnowTheKeys(plans, tally);
  trace('every instance knows the keys');

  const clients = new LoadClients(targets, tally);
  const started = Date.now();
  clients.start(plans);
  const done: string[] = [];
  for (const fault of shuffled(FAULTS, random)) {
    await new Promise((resolve) => setTimeout(resolve, GAP_MS));
    trace(fault);
    done.push(await inflict(fault, random));
    trace(`done: ${done.at(-1)}`);
  }
  await new Promise((resolve) => setTimeout(resolve, GAP_MS));
  trace('stopping the clients');
  await clients.stop();
  trace(tally.summary());
  const run = { seed, faults: done, seconds: Math.round((Date.now() - started) / 1000), sent: clients.sent };
  const evidence = `${JSON.stringify(run)}; ${tally.summary()}`;

  expect({ evidence, over: tally.overAdmitted(LIMITS) }).toEqual({ evidence, over: [] });
  expect({ evidence, unnamed: tally.unnamed }).toEqual({ evidence, unnamed: 0 });
  // The run did what it is for: clients were refused (limits exceeded) and admitted on every limit.
  expect({ evidence, refused: tally.statuses.get('429') ?? 0 }).toEqual({ evidence, refused: expect.any(Number) });
  expect(tally.statuses.get('429') ?? 0).toBeGreaterThan(0);
  for (const limit of Object.keys(LIMITS)) expect(tally.windows().some((w) => w.limit === limit)).toBe(true);
  expect(done).toHaveLength(FAULTS.length);
});
