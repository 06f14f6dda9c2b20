import type { AccessLists } from './access-lists';
import { accessPolicyOf, type AccessPolicy } from './access-policy';

/**
 * The access policy of a key's consumer, from what the instance holds in memory (never a store
 * call); null when the key has no consumer or the consumer no policy. The check-access step asks it
 * for every key that reaches it.
 */
export type ConsumerAccessPolicy = (key: { readonly consumerId?: string | null }) => AccessPolicy | null;

/**
 * The seam consumers plug into (issue 38): given how this instance finds a consumer record in
 * memory by id (its consumer directory, never a store call), the check-access step's view of a
 * key's consumer policy. The consumer's compiled policy is cached with its record object, as a
 * key's is, so a changed consumer (a new record) is compiled once, and an unchanged one never again.
 */
export function consumerAccessPolicy(
  findConsumer: (id: string) => (AccessLists & object) | null | undefined,
): ConsumerAccessPolicy {
  return (key) => {
    const id = key.consumerId;
    if (id === undefined || id === null) return null;
    const consumer = findConsumer(id);
    // A consumer this instance does not hold (yet) has no lists here: the key's own policy decides.
    return consumer ? accessPolicyOf(consumer) : null;
  };
}
