import { restartDelayMs, workerCount } from '../../../src/workers/worker-count';

describe('workerCount', () => {
  it('takes a number as it is', () => {
    expect(workerCount(3, () => 64)).toBe(3);
  });

  it('auto is the CPUs available to the process, at least one', () => {
    expect(workerCount('auto', () => 6)).toBe(6);
    expect(workerCount('auto', () => 0)).toBe(1);
  });
});

describe('restartDelayMs: replacing workers that keep dying', () => {
  it('replaces at once after a worker that had served a while', () => {
    expect(restartDelayMs(0)).toBe(0);
  });

  it('doubles from 100 ms while they keep dying young, up to 10 s', () => {
    expect([1, 2, 3, 4, 5, 6, 7, 8, 20].map(restartDelayMs)).toEqual([
      100, 200, 400, 800, 1600, 3200, 6400, 10_000, 10_000,
    ]);
  });
});
