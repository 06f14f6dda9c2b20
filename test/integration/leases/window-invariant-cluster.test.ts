import { FAULTS, Fleet, LIMITS, runFaulted } from './faulted-run';
import { PersistentCluster } from './persistent-redis';

/**
 * window-invariant.test.ts on a Redis Cluster of three masters (each keeping its data): the same
 * fleet, clients and faults, the store's pause on every master and its restart one master at a
 * time (SHUTDOWN SAVE, back on its data and its nodes.conf).
 */

jest.setTimeout(180_000);

let fleet: Fleet;

beforeAll(async () => {
  fleet = await Fleet.start(await PersistentCluster.start());
});

afterAll(async () => {
  await fleet?.stop();
});

test('no window admits more than its limit: instances and a worker SIGKILLed, a reload, a Cluster paused and a master restarted, in a seeded order', async () => {
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
