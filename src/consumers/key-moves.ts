import type { KeyLimiter, KeyRef } from '../limits/types';

/**
 * How long after a key's move its windows are moved once more. Every instance learns of the move
 * within a second (the key's change message drops its cached record); until then one may still
 * count the key's requests at the old place, and the second move carries those over.
 */
export const SECOND_MOVE_DELAY_MS = 2_000;

/**
 * A key moved between consumers keeps its own windows (CONTRACT §5, issue 38): they live beside its
 * consumer's (KeyLimiter.moveWindows), so they are moved with it, now and once more after the change has
 * reached every instance. What the old place counted is added to the new one, never lost.
 */
export function keyWindowMover(
  limiter: KeyLimiter,
  onLateMoveFailed: (err: unknown) => void,
  delayMs = SECOND_MOVE_DELAY_MS,
) {
  return async (keyId: string, from: string | undefined, to: string | undefined): Promise<void> => {
    const fromRef: KeyRef = { keyId, consumerId: from };
    const toRef: KeyRef = { keyId, consumerId: to };
    await limiter.moveWindows(fromRef, toRef);
    const late = setTimeout(() => void limiter.moveWindows(fromRef, toRef).catch(onLateMoveFailed), delayMs);
    late.unref();
  };
}
