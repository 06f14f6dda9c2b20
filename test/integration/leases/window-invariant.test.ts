import { FAULTS, Fleet, LIMITS, runFaulted } from './faulted-run';
import { PersistentRedis } from './persistent-redis';

/**
 * The invariant of leases (issue 50, CONTRACT §4 "Leases"): no window ever admits more than its
 * limit, through faults. Three gateway instances as real processes (one WORKERS=2) on one Redis
 * of the test's own, a key and a consumer's two keys with limits the clients exceed, clients
 * hammering every instance at a bounded rate, and mid-run, in a seeded order: an instance
 * SIGKILLed and restarted, a worker SIGKILLed, a SIGHUP reload, Redis paused (failMode: closed)
 * and Redis restarted with its data. Counted from the clients' side, per window as the gateway
 * named it. Runs on the per-request path today and unchanged once leases land.
 * LEASES_HARNESS_SEED=<n> replays a run's order, LEASES_HARNESS_TRACE=1 prints its steps.
 */

jest.setTimeout(180_000);

let fleet: Fleet;

beforeAll(async () => {
  fleet = await Fleet.start(await PersistentRedis.start());
});

afterAll(async () => {
  await fleet?.stop();
});

test('no window admits more than its limit: instances and a worker SIGKILLed, a reload, Redis paused and restarted, in a seeded order', async () => {
  const { tally, faults, evidence, leaseAdmissions } = await runFaulted(fleet);

  expect({ evidence, over: tally.overAdmitted(LIMITS) }).toEqual({ evidence, over: [] });
  expect({ evidence, unnamed: tally.unnamed }).toEqual({ evidence, unnamed: 0 });
  // The run did what it is for: every fault happened, clients were refused (limits exceeded) and admitted on every limit.
  expect(faults).toHaveLength(FAULTS.length);
  // Leases were in play (rateLimit.leases on, busy at the clients' rates): requests admitted with no round trip.
  expect({ evidence, leased: leaseAdmissions > 0 }).toEqual({ evidence, leased: true });
  expect(tally.statuses.get('429') ?? 0).toBeGreaterThan(0);
  for (const limit of Object.keys(LIMITS)) expect(tally.windows().some((w) => w.limit === limit)).toBe(true);
});
