import type { ConsumerAccessPolicy } from '../gateway/steps/check-access';
import type { AccessLists } from './access-lists';
import { accessPolicyOf } from './access-policy';

/**
 * The seam consumers plug into (issue 38): given how this instance finds a consumer record in
 * memory by id (its consumer directory, never a store call), the check-access step's view of a
 * key's consumer policy. The consumer's compiled policy is cached with its record object, as a
 * key's is, so a changed consumer (a new record) is compiled once, and an unchanged one never again.
 */
export function consumerAccessPolicy(
  findConsumer: (id: string) => (AccessLists & object) | null | undefined,
): ConsumerAccessPolicy {
  return (record) => {
    const id = (record as { consumerId?: string }).consumerId;
    if (id === undefined) return null;
    const consumer = findConsumer(id);
    // A consumer this instance does not hold (yet) has no lists here: the key's own policy decides.
    return consumer ? accessPolicyOf(consumer) : null;
  };
}
