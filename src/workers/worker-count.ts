import os from 'node:os';
import type { Config } from '../shared/config';

/**
 * WORKERS as a number. `auto` is os.availableParallelism(): libuv counts the CPUs this process may
 * run on (its affinity mask) and, since libuv 1.49, the cgroup v1/v2 CPU quota of a container
 * (a quota of 2.5 CPUs counts 2), which is what a worker per core should follow.
 */
export function workerCount(workers: Config['workers'], availableCpus: () => number = os.availableParallelism): number {
  return workers === 'auto' ? Math.max(1, availableCpus()) : workers;
}

/** How long to wait before replacing a worker that died: doubling from 100 ms to 10 s while they keep dying. */
export function restartDelayMs(consecutiveEarlyDeaths: number): number {
  if (consecutiveEarlyDeaths <= 0) return 0;
  return Math.min(10_000, 100 * 2 ** (consecutiveEarlyDeaths - 1));
}
