import type { ConsumerShare } from '../limits/types';
import type { ConsumerDirectory } from './consumer-directory';
import type { ConsumerRecord } from './types';

/** A consumer's windows as the limiter takes them; undefined when it has no limits (nothing shared to count). */
export function consumerShareOf(record: ConsumerRecord): ConsumerShare | undefined {
  const { perMinute, perDay, perMonth } = record.limits;
  if (perMinute === undefined && perDay === undefined && perMonth === undefined) return undefined;
  return { id: record.id, limits: record.limits, billingDay: record.billingDay };
}

/**
 * What the request path asks about a key's consumer, answered from the directory held in process.
 * Shares are built once per consumer record (the directory replaces a record on each change), so
 * a request allocates nothing to learn its consumer's limits.
 */
export function consumerLookup(directory: ConsumerDirectory) {
  const shares = new WeakMap<ConsumerRecord, ConsumerShare | null>();
  const shareOfRecord = (consumer: ConsumerRecord): ConsumerShare | undefined => {
    let share = shares.get(consumer);
    if (share === undefined) {
      share = consumerShareOf(consumer) ?? null;
      shares.set(consumer, share);
    }
    return share ?? undefined;
  };
  return {
    shareOf(key: { consumerId?: string }): ConsumerShare | undefined {
      const consumer = key.consumerId === undefined ? undefined : directory.get(key.consumerId);
      return consumer && shareOfRecord(consumer);
    },
    consumerOf(key: { consumerId?: string }): { id: string; name: string; share?: ConsumerShare } | undefined {
      const consumer = key.consumerId === undefined ? undefined : directory.get(key.consumerId);
      if (!consumer) return undefined;
      const share = shareOfRecord(consumer);
      return share ? { id: consumer.id, name: consumer.name, share } : { id: consumer.id, name: consumer.name };
    },
  };
}
