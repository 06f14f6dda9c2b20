import { retryAfterSeconds } from '../../../src/shared/retry-after';

describe('retryAfterSeconds', () => {
  it.each([
    [0, '1'],
    [-5, '1'],
    [1, '1'],
    [999, '1'],
    [1000, '1'],
    [1001, '2'],
    [44_750, '45'],
    [86_400_000, '86400'],
  ])('%d ms → %s', (ms, expected) => {
    expect(retryAfterSeconds(ms)).toBe(expected);
  });
});
