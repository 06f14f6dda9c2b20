import fc from 'fast-check';
import { QUOTA_THRESHOLDS, crossedThresholds, thresholdUnits } from '../../../src/notifications/thresholds';

describe('crossedThresholds', () => {
  test('a limit of 10, one unit at a time: 80 % at the 8th, 90 % at the 9th, 100 % at the 10th', () => {
    const crossed = Array.from({ length: 10 }, (_, i) => crossedThresholds(10, i + 1, 1));
    expect(crossed).toEqual([[], [], [], [], [], [], [], [80], [90], [100]]);
  });

  test('a cost that jumps over several thresholds passes each of them', () => {
    expect(crossedThresholds(10, 9, 3)).toEqual([80, 90]);
    expect(crossedThresholds(10, 10, 10)).toEqual([80, 90, 100]);
  });

  test('small limits: several thresholds fall on one unit', () => {
    expect(crossedThresholds(1, 1, 1)).toEqual([80, 90, 100]);
    expect([4, 5].map((used) => crossedThresholds(5, used, 1))).toEqual([[80], [90, 100]]);
  });

  test('thresholds are whole units, rounded up: ceil(limit * percent / 100)', () => {
    expect(QUOTA_THRESHOLDS.map((p) => thresholdUnits(1234, p))).toEqual([988, 1111, 1234]);
    expect(QUOTA_THRESHOLDS.map((p) => thresholdUnits(10, p))).toEqual([8, 9, 10]);
  });

  test('a window already past its limit (limits lowered under it) passes nothing more', () => {
    expect(crossedThresholds(10, 12, 1)).toEqual([]);
  });

  test('whatever the costs, each threshold is passed exactly once on the way to the limit', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 10_000 }),
        fc.array(fc.integer({ min: 1, max: 50 }), { minLength: 1, maxLength: 400 }),
        (limit, costs) => {
          const passed: number[] = [];
          let used = 0;
          for (const cost of costs) {
            // The limiter admits only what fits.
            if (used + cost > limit) continue;
            used += cost;
            passed.push(...crossedThresholds(limit, used, cost));
          }
          const reached = QUOTA_THRESHOLDS.filter((p) => used >= thresholdUnits(limit, p));
          expect(passed).toEqual(reached);
        },
      ),
    );
  });
});
