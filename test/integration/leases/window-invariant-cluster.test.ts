import { expectInvariantHeld, Fleet, runFaulted } from './faulted-run';
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

test('no window admits more than its limit, nor falls short of it beyond the documented bound: instances and a worker SIGKILLed, a reload, a Cluster paused and a master restarted, in a seeded order', async () => {
  expectInvariantHeld(await runFaulted(fleet));
});
