import { eventually } from '../../support/eventually';
import { awayFromMinuteEnd } from '../../support/minute-end';
import { LONG_ADMIN_TOKEN } from '../startup/startup-kit';
import { GatewayInstance, harnessConfigYaml } from './fleet-kit';
import { LoadClients, readAnswer, type ClientPlan } from './load-clients';
import type { FaultedStore } from './persistent-redis';
import { harnessSeed, seededRandom, shuffled } from './seeded-order';
import {
  beyondBound,
  describeBounds,
  underAdmissionBounds,
  type FaultRecord,
  type WindowBound,
} from './under-admission-bound';
import { WindowTally } from './window-tally';
import { WindowWatch } from './window-watch';

/**
 * One faulted run of the window-invariant harness: three gateway instances (one WORKERS=2) on a
 * store, a key and a consumer's two keys with limits the clients exceed, clients on every
 * instance, and the faults in a seeded order. The test files give the store and assert.
 */

/** One operation costs this many units (config `costs`), so windows count costs, not requests. */
export const PET_COST = 3;
/** Units per minute of each limit, by tally name; day limits far above what the run sends, so the minutes are the tightest. */
export const LIMITS = {
  'key:solo': 540,
  'key:shared-list': 600,
  'key:shared-pet': 594,
  'consumer:shared': 720,
} as const;
const PER_DAY = 1_000_000;
/** Traffic between two faults, and after the last. */
const GAP_MS = 2_500;
/** Traffic the run gives one minute window at the least: the clients fill it at a third of their rates. */
const RUN_WINDOW_MS = 40_000;
/** How long the store is paused (CLIENT PAUSE), against the gateways' 500 ms command timeout. */
const STORE_PAUSE_MS = 1_500;

export type Fault = 'kill-instance' | 'kill-worker' | 'reload' | 'pause-store' | 'restart-store';
export const FAULTS: readonly Fault[] = ['kill-instance', 'kill-worker', 'reload', 'pause-store', 'restart-store'];

/** LEASES_HARNESS_TRACE=1: each step of the run on stderr as it happens (a hang shows where it stands). */
export function trace(step: string): void {
  if (process.env.LEASES_HARNESS_TRACE) process.stderr.write(`[leases harness ${new Date().toISOString()}] ${step}\n`);
}

export class Fleet {
  private constructor(
    readonly store: FaultedStore,
    readonly instances: GatewayInstance[],
  ) {}

  /** Three instances, the second with two workers, on `store`, sharing a fresh namespace. */
  static async start(store: FaultedStore): Promise<Fleet> {
    const settings = {
      storeEnv: store.env,
      configYaml: harnessConfigYaml(`asg:leases:${process.pid}:${Date.now()}`, PET_COST),
    };
    const instances = await Promise.all([
      GatewayInstance.started('one', 1, settings),
      GatewayInstance.started('two-workers', 2, settings),
      GatewayInstance.started('three', 1, settings),
    ]);
    trace('instances started');
    return new Fleet(store, instances);
  }

  async stop(): Promise<void> {
    trace('stopping');
    await Promise.all(this.instances.map((instance) => instance.stop()));
    await this.store.stop();
  }

  async admin(path: string, body: unknown): Promise<Record<string, unknown>> {
    const res = await fetch(`${this.instances[0]!.adminUrl}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${LONG_ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    const text = await res.text();
    if (res.status !== 201) throw new Error(`POST ${path} answered ${res.status}: ${text}`);
    return JSON.parse(text) as Record<string, unknown>;
  }

  /** Processes serving requests: each holds its own leases. */
  get processesServing(): number {
    return this.instances.reduce((sum, instance) => sum + instance.workers, 0);
  }

  /** Runs one fault to its end (an instance killed is back up, the store restarted answers); when, and what it killed. */
  async inflict(fault: Fault, random: () => number): Promise<FaultRecord> {
    const startedAt = Date.now();
    const struck = (what: string, processesKilled: number, storeOutage = false): FaultRecord => ({
      what,
      startedAt,
      struckAt: Date.now(),
      processesKilled,
      storeOutage,
    });
    switch (fault) {
      case 'kill-instance': {
        const victim = this.instances[Math.floor(random() * this.instances.length)]!;
        await victim.kill();
        const record = struck(`SIGKILL ${victim.name}, restarted`, victim.workers);
        await victim.start();
        return record;
      }
      case 'kill-worker': {
        const workers = this.instances.find((instance) => instance.workers === 2)!;
        return struck(`SIGKILL worker ${workers.killWorker()} of ${workers.name}`, 1);
      }
      case 'reload': {
        const reloaded = this.instances[Math.floor(random() * this.instances.length)]!;
        reloaded.reload();
        return struck(`SIGHUP ${reloaded.name}`, 0);
      }
      case 'pause-store':
        await this.store.pause(STORE_PAUSE_MS);
        // CLIENT PAUSE answers at once; the store answers again when the pause ends.
        return { ...struck(`CLIENT PAUSE ${STORE_PAUSE_MS}`, 0, true), struckAt: Date.now() + STORE_PAUSE_MS };
      case 'restart-store':
        return struck(await this.store.restart(), 0, true);
    }
  }
}

async function newKey(fleet: Fleet, name: string, perMinute: number, consumerId?: string): Promise<string> {
  const limits = { perMinute, perDay: PER_DAY };
  const created = await fleet.admin('/admin/keys', { name, plan: 'enterprise', limits, consumerId });
  return `Bearer ${String(created.key)}`;
}

/** The key, and the consumer's two keys (one listing pets at cost 1, one reading a pet at PET_COST). */
async function clientPlans(fleet: Fleet): Promise<ClientPlan[]> {
  const limits = { perMinute: LIMITS['consumer:shared'] };
  const consumerId = String((await fleet.admin('/admin/consumers', { name: 'shared', limits })).id);
  const solo = await newKey(fleet, 'solo', LIMITS['key:solo']);
  const list = await newKey(fleet, 'shared-list', LIMITS['key:shared-list'], consumerId);
  const pet = await newKey(fleet, 'shared-pet', LIMITS['key:shared-pet'], consumerId);
  const shared = (key: string) => [key, 'consumer:shared'];
  return [
    // Enough per process for leases (HARNESS_BUSY_REQUESTS_PER_SECOND), and over every limit within 10 s of a minute.
    { auth: solo, path: '/v1/pets', units: 1, limits: ['key:solo'], perSecond: 60 },
    { auth: list, path: '/v1/pets', units: 1, limits: shared('key:shared-list'), perSecond: 40 },
    { auth: pet, path: '/v1/pets/1', units: PET_COST, limits: shared('key:shared-pet'), perSecond: 20 },
  ];
}

/** Every instance knows every key (key changes reach all within 1 s); the probes count in the tally like any request. */
async function untilAllInstancesKnowTheKeys(
  fleet: Fleet,
  plans: ClientPlan[],
  tally: WindowTally<ClientPlan>,
): Promise<void> {
  for (const instance of fleet.instances)
    for (const plan of plans)
      await eventually(async () => {
        const sentAt = Date.now();
        const res = await fetch(`${instance.gatewayUrl}${plan.path}`, { headers: { authorization: plan.auth } });
        const answer = await readAnswer(res, plan, sentAt);
        tally.record(plan, answer);
        return res.status !== 401;
      });
}

export interface FaultedRun {
  tally: WindowTally<ClientPlan>;
  /** What was done, in order. */
  faults: FaultRecord[];
  /** Every window a limit filled, what it admitted and its bound on under-admission. */
  bounds: WindowBound[];
  /** LEASES_HARNESS_SEED that replays the run's order. */
  seed: number;
  /** The seed, the faults, the run's length and every window's count: a failure's message. */
  evidence: string;
  /** Requests admitted from leases, summed over the instances' metrics at the end (an instance killed forgot its own). */
  leaseAdmissions: number;
}

/** gateway_lease_admissions_total{decided_by="lease"} of every instance, summed (0 for one that does not answer). */
async function leaseAdmissions(fleet: Fleet): Promise<number> {
  let total = 0;
  for (const instance of fleet.instances) {
    const text = await fetch(`${instance.adminUrl}/metrics`)
      .then((res) => res.text())
      .catch(() => '');
    const match = /^gateway_lease_admissions_total\{decided_by="lease"\} (\d+)/m.exec(text);
    total += Number(match?.[1] ?? 0);
  }
  return total;
}

/** The limit (tally name) of a windows hash the evidence reads the store's count of: the consumer's and the key's of no consumer. */
function watchedLimit(hash: string): string | null {
  if (hash.endsWith('}:c')) return 'consumer:shared';
  return /:rl:\{key_[^}]+\}$/.test(hash) ? 'key:solo' : null;
}

/** Keys, then clients on every instance and the faults in a seeded order (LEASES_HARNESS_SEED replays one). */
export async function runFaulted(fleet: Fleet): Promise<FaultedRun> {
  const seed = harnessSeed();
  const random = seededRandom(seed);
  const tally = new WindowTally<ClientPlan>();
  const plans = await clientPlans(fleet);
  await untilAllInstancesKnowTheKeys(fleet, plans, tally);
  trace('every instance knows the keys');

  const watch = new WindowWatch(fleet.store.env, watchedLimit);
  const clients = new LoadClients(() => fleet.instances.map((instance) => instance.gatewayUrl), tally);
  const started = Date.now();
  const faults: FaultRecord[] = [];
  let leased: number;
  // A fault that throws (an instance that does not come back) still stops the clients and the watch's connections.
  try {
    // The clients must fill a window for the run to show anything, and a busy machine slows them
    // (at most MAX_IN_FLIGHT each): a CI run that straddled a minute turn split 25 s of traffic in
    // two and filled neither. Starting with 40 s of the minute left gives one window 40 s of it.
    await awayFromMinuteEnd(RUN_WINDOW_MS);
    clients.start(plans);
    for (const fault of shuffled(FAULTS, random)) {
      await new Promise((resolve) => setTimeout(resolve, GAP_MS));
      trace(fault);
      faults.push(await fleet.inflict(fault, random));
      trace(`done: ${faults.at(-1)!.what}`);
    }
    await new Promise((resolve) => setTimeout(resolve, GAP_MS));
  } finally {
    await clients.stop();
    trace(tally.summary());
    leased = await leaseAdmissions(fleet);
    await watch.stop();
  }
  const bounds = underAdmissionBounds({
    tally,
    plans,
    faults,
    limits: LIMITS,
    processesServing: fleet.processesServing,
    instances: fleet.instances.length,
  }).map((bound) => ({ ...bound, storeCounted: watch.counted(bound.limit, bound.resetAt) }));
  const timeline = faults.map((f) => `${f.what} at +${((f.startedAt - started) / 1000).toFixed(1)} s`);
  const run = {
    seed,
    faults: timeline,
    seconds: Math.round((Date.now() - started) / 1000),
    sent: clients.sent,
    leased,
  };
  const evidence = `${JSON.stringify(run)}; ${tally.summary()}; filled windows: ${describeBounds(bounds)}`;
  return { tally, faults, bounds, seed, evidence, leaseAdmissions: leased };
}

/**
 * What both stores' runs must show: no window over its limit, every window a limit filled short
 * of it by no more than the documented bound (under-admission-bound.ts), and a run that did what
 * it is for.
 */
export function expectInvariantHeld(run: FaultedRun): void {
  const { tally, faults, evidence, leaseAdmissions, bounds } = run;
  console.log(`seed ${run.seed}: filled windows: ${describeBounds(bounds)}`);
  expect({ evidence, over: tally.overAdmitted(LIMITS) }).toEqual({ evidence, over: [] });
  expect({ evidence, short: beyondBound(bounds) }).toEqual({ evidence, short: [] });
  expect({ evidence, unnamed: tally.unnamed, unnamedRefusals: tally.unnamedRefusals }).toEqual({
    evidence,
    unnamed: 0,
    unnamedRefusals: 0,
  });
  // The run did what it is for: every fault happened, a limit filled a window (clients refused by it) and each limit admitted.
  expect(faults).toHaveLength(FAULTS.length);
  expect({ evidence, filled: bounds.length > 0 }).toEqual({ evidence, filled: true });
  // Leases were in play (rateLimit.leases on, busy at the clients' rates): requests admitted with no round trip.
  expect({ evidence, leased: leaseAdmissions > 0 }).toEqual({ evidence, leased: true });
  for (const limit of Object.keys(LIMITS)) expect(tally.windows().some((w) => w.limit === limit)).toBe(true);
}
