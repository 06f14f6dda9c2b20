import { jitteredRetryAfterSeconds } from '../../../src/gateway/rate-limit-headers';

describe('jitteredRetryAfterSeconds', () => {
  it('is the plain wait without jitter, whatever the random source says', () => {
    expect(jitteredRetryAfterSeconds(1_500, 0, () => 0.99)).toBe('2');
    expect(jitteredRetryAfterSeconds(0, 0, () => 0.5)).toBe('1');
  });

  it('adds floor(random * (N + 1)) whole seconds: 0 to N, each equally likely', () => {
    expect([0, 0.16, 0.17, 0.5, 0.84, 0.999999].map((r) => jitteredRetryAfterSeconds(10_000, 5, () => r))).toEqual(['10', '10', '11', '13', '15', '15']);
  });

  it('never undercuts the wait and never exceeds it by more than N, even for a source that returns 1 or less than 0', () => {
    expect(jitteredRetryAfterSeconds(10_000, 5, () => 1)).toBe('15');
    expect(jitteredRetryAfterSeconds(10_000, 5, () => -0.5)).toBe('10');
  });

  it('spreads refused clients over the whole range with Math.random', () => {
    const seen = new Map<number, number>();
    for (let i = 0; i < 6000; i++) {
      const value = Number(jitteredRetryAfterSeconds(30_000, 5, Math.random));
      seen.set(value, (seen.get(value) ?? 0) + 1);
    }
    expect([...seen.keys()].sort((a, b) => a - b)).toEqual([30, 31, 32, 33, 34, 35]);
    // Uniform: each of the six values about 1000 times (far outside chance if not).
    for (const count of seen.values()) expect(count).toBeGreaterThan(800);
  });
});
