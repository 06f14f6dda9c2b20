import { randomBytes } from 'node:crypto';
import { ApiError } from '../shared/errors';
import type { ApiKeyRecord, KeyStore } from '../keys/types';

/**
 * How long a consumer stays closed to keys while its deletion checks them: far longer than a read
 * of every key takes (the check verifies the hold lasted, see deleteUnusedConsumer).
 */
export const DELETION_HOLD_MS = 10 * 60_000;

/**
 * How long it stays closed once deleted. A key write checks that its consumer exists a moment
 * before the write itself: one that found the consumer just before the delete lands well within
 * this (Redis commands time out in a second or two) and is refused.
 */
export const AFTER_DELETION_HOLD_MS = 60_000;

/** What a deletion needs of the key store: its keys, and closing a consumer to new ones. */
export type ConsumerKeys = Pick<KeyStore, 'list' | 'closeConsumer' | 'reopenConsumer'>;

/** Throws 409 while a key that is not revoked belongs to the consumer. */
async function assertNoActiveKeys(id: string, keys: ConsumerKeys): Promise<void> {
  const active = (await keys.list()).filter((key: ApiKeyRecord) => key.consumerId === id && key.revokedAt === null);
  if (active.length > 0) {
    throw new ApiError(
      'conflict',
      `Consumer ${id} still has ${active.length} active key(s) (${active
        .slice(0, 5)
        .map((k) => k.id)
        .join(', ')}): revoke them or move them to another consumer first.`,
    );
  }
}

/**
 * Deletes a consumer no key that is not revoked belongs to (CONTRACT §5), never leaving a live key
 * whose consumer is gone, over any number of instances. The key store and the consumer store sit
 * in different Redis slots (a Cluster runs no script across them), so the two checks cannot be one
 * script; instead the consumer is first closed to keys in the key store (every key write checks
 * that in its own script, see KeyStore.closeConsumer), then its keys are read: a key written before
 * the close is seen, one after it is refused. Only then is the record removed, and the consumer
 * stays closed a little longer for a write that found it just before. A first read of the keys
 * answers the usual 409 without closing anything, so keys are refused only while a deletion that
 * may succeed is under way.
 */
export async function deleteUnusedConsumer(
  id: string,
  keys: ConsumerKeys,
  remove: () => Promise<boolean>,
): Promise<boolean> {
  await assertNoActiveKeys(id, keys);
  if (!keys.closeConsumer || !keys.reopenConsumer) return remove();
  const token = randomBytes(12).toString('hex');
  try {
    await keys.closeConsumer(id, token, DELETION_HOLD_MS);
    await assertNoActiveKeys(id, keys);
    // The close must have held through the read: a key written after it ran out could be missed.
    if (!(await keys.closeConsumer(id, token, DELETION_HOLD_MS))) {
      throw new ApiError(
        'conflict',
        `Checking consumer ${id}'s keys took longer than its hold (${DELETION_HOLD_MS / 1000} s); nothing deleted, try again.`,
      );
    }
  } catch (err) {
    await keys.reopenConsumer(id, token).catch(() => {});
    throw err;
  }
  // A failure from here on may follow a delete that happened (an answer lost): the hold then just runs out.
  const deleted = await remove();
  if (deleted) await keys.closeConsumer(id, token, AFTER_DELETION_HOLD_MS).catch(() => {});
  else await keys.reopenConsumer(id, token).catch(() => {});
  return deleted;
}
