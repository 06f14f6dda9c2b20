import { keyWindowMover, SECOND_MOVE_DELAY_MS } from '../../../src/consumers/key-moves';
import type { KeyRef } from '../../../src/limits/types';
import { KeyLimiterFake } from '../limits/key-limiter-fake';

/**
 * A key moved between consumers takes its windows along (src/consumers/key-moves.ts): now, and once
 * more after every instance has learnt of the move, for what one counted at the old place meanwhile.
 */

class MovingLimiter extends KeyLimiterFake {
  readonly moves: Array<[KeyRef, KeyRef]> = [];
  readonly refusals: Error[] = [];
  override async moveWindows(from: KeyRef, to: KeyRef): Promise<void> {
    this.moves.push([from, to]);
    const err = this.refusals.shift();
    if (err) throw err;
  }
}

beforeEach(() => jest.useFakeTimers());
afterEach(() => jest.useRealTimers());

test('the windows move from the old consumer to the new at once, and again after the delay', async () => {
  const limiter = new MovingLimiter();
  const move = keyWindowMover(limiter, () => {});
  await move('key_a', 'con_old', 'con_new');
  const once: [KeyRef, KeyRef] = [
    { keyId: 'key_a', consumerId: 'con_old' },
    { keyId: 'key_a', consumerId: 'con_new' },
  ];
  expect(limiter.moves).toEqual([once]);
  await jest.advanceTimersByTimeAsync(SECOND_MOVE_DELAY_MS - 1);
  expect(limiter.moves).toHaveLength(1);
  await jest.advanceTimersByTimeAsync(1);
  expect(limiter.moves).toEqual([once, once]);
  await jest.advanceTimersByTimeAsync(10 * SECOND_MOVE_DELAY_MS);
  expect(limiter.moves).toHaveLength(2);
});

test('into and out of no consumer alike', async () => {
  const limiter = new MovingLimiter();
  const move = keyWindowMover(limiter, () => {});
  await move('key_a', undefined, 'con_new');
  await move('key_b', 'con_old', undefined);
  expect(limiter.moves.map(([from, to]) => [from.consumerId, to.consumerId])).toEqual([
    [undefined, 'con_new'],
    ['con_old', undefined],
  ]);
});

test('a first move that fails fails the change (nothing planned); a late one that fails is reported', async () => {
  const limiter = new MovingLimiter();
  const late: string[] = [];
  const move = keyWindowMover(limiter, (err) => late.push((err as Error).message), 50);
  limiter.refusals.push(new Error('Redis is unreachable'));
  await expect(move('key_a', 'con_old', 'con_new')).rejects.toThrow('Redis is unreachable');
  await jest.advanceTimersByTimeAsync(1_000);
  expect(limiter.moves).toHaveLength(1);

  limiter.refusals.push(undefined as unknown as Error, new Error('Command timed out'));
  await move('key_a', 'con_old', 'con_new');
  await jest.advanceTimersByTimeAsync(50);
  expect(limiter.moves).toHaveLength(3);
  expect(late).toEqual(['Command timed out']);
});
