import { FairShareQueue } from '../src/gateway/upstream/fair-share-queue';
import { newcomerReserve } from '../src/gateway/upstream/upstream-guard';

/**
 * The fair queue idle (issue 41): what `FairShareQueue` costs a request while it stays below its
 * bound, as every row of the table has it. The queue is not optional (UpstreamGuard builds it for
 * every forwarder from upstream.maxSockets and maxPending), so no row runs without it and a row
 * with a larger bound would only repeat the plain row: idle, `offer` starts the request at once
 * and `finish` finds no one waiting, whatever the bound. It is measured here in process instead:
 * one `offer` and one `finish` per request, with as many held as the bench's connections, on the
 * defaults (maxSockets 256, maxPending 256), CPU time of this process (process.cpuUsage).
 */
export interface FairQueueIdleFigures {
  /** One key holding every request (the plain row). */
  oneKeyMicros: number;
  /** Keys taken in turn (the 100-key consumer row): each offer adds a key's entries, each finish removes them. */
  manyKeysMicros: number;
}

const MAX_SOCKETS = 256;
const MAX_PENDING = 256;
/** Offers per measure: long enough (about 0.2 s) that the CPU clock's resolution does not matter. */
const REQUESTS = 1_000_000;

function microsPerRequest(inFlight: number, keys: string[]): number {
  const queue = new FairShareQueue<number>(MAX_SOCKETS, MAX_SOCKETS + MAX_PENDING, newcomerReserve(MAX_SOCKETS));
  // The requests in flight, a ring: the oldest finishes as each new one arrives in its place.
  const held: string[] = [];
  let next = 0;
  const arrive = (): string => {
    const key = keys[next++ % keys.length]!;
    if (queue.offer(key, next).outcome !== 'start')
      throw new Error('fair queue idle: a request waited below the bound');
    return key;
  };
  for (let i = 0; i < inFlight; i++) held.push(arrive());
  const turn = (i: number) => {
    const slot = i % inFlight;
    queue.finish(held[slot]!);
    held[slot] = arrive();
  };
  // Warm-up: the optimiser sees the loop before it is timed.
  for (let i = 0; i < REQUESTS / 10; i++) turn(i);
  // The loop's own work (the ring, the modulo) is counted too: the figure errs on the high side.
  const before = process.cpuUsage();
  for (let i = 0; i < REQUESTS; i++) turn(i);
  const used = process.cpuUsage(before);
  return (used.user + used.system) / REQUESTS;
}

/** One measure of each shape, with `inFlight` requests held (the bench's connections). */
export function measureFairQueueIdle(inFlight: number, manyKeys: number): FairQueueIdleFigures {
  const tenants = Array.from({ length: manyKeys }, (_, i) => `bench-key-${i}`);
  return {
    oneKeyMicros: microsPerRequest(inFlight, tenants.slice(0, 1)),
    manyKeysMicros: microsPerRequest(inFlight, tenants),
  };
}
