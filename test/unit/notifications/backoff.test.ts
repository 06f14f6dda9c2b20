import { RETRY_DELAYS_MS, RETRY_FOR_MS, nextAttemptAt } from '../../../src/notifications/backoff';

const T0 = Date.UTC(2026, 2, 10, 12);
const middle = () => 0.5;

describe('the retry schedule', () => {
  test('the first two retries come within a minute of the first attempt', () => {
    const first = nextAttemptAt(1, T0, T0, middle)!;
    const second = nextAttemptAt(2, T0, first, middle)!;
    expect([first - T0, second - T0]).toEqual([5_000, 35_000]);
    // Even with the most jitter either way.
    expect(
      nextAttemptAt(
        2,
        T0,
        nextAttemptAt(1, T0, T0, () => 0.9999)!,
        () => 0.9999,
      )! - T0,
    ).toBeLessThan(60_000);
  });

  test('waits grow to 8 hours and stay there', () => {
    const waits = Array.from({ length: 14 }, (_, i) => nextAttemptAt(i + 1, T0, T0, middle)! - T0);
    expect(waits.slice(0, RETRY_DELAYS_MS.length)).toEqual([...RETRY_DELAYS_MS]);
    expect(waits.slice(RETRY_DELAYS_MS.length)).toEqual([8, 8, 8, 8].map((h) => h * 3_600_000));
  });

  test('retries go on for at least 24 hours, then the event is given up', () => {
    for (const random of [() => 0, middle, () => 0.9999]) {
      let now = T0;
      let attempts = 1;
      for (
        let next = nextAttemptAt(attempts, T0, now, random);
        next !== null;
        next = nextAttemptAt(++attempts, T0, now, random)
      )
        now = next;
      expect(now - T0).toBeGreaterThanOrEqual(RETRY_FOR_MS);
      // And not for days on end: the last attempt is within one 8 h wait past the day.
      expect(now - T0).toBeLessThan(RETRY_FOR_MS + 9 * 3_600_000);
    }
  });

  test('the jitter moves a wait by at most 10 % either way', () => {
    expect(nextAttemptAt(3, T0, T0, () => 0)! - T0).toBe(108_000);
    expect(nextAttemptAt(3, T0, T0, () => 0.9999)! - T0).toBeLessThanOrEqual(132_000);
  });
});
