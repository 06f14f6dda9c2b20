import type { BlockList } from 'node:net';
import { addressMatcher, parseAddressEntry, type AddressEntry } from '../shared/http/address-entry';
import type { AccessLists } from './access-lists';

/**
 * An access policy as the request path matches it (CONTRACT §4): the operations a caller may use
 * and the addresses it may call from; null on an axis means no list there, so anything passes.
 */
export interface AccessPolicy {
  readonly operations: ReadonlySet<string> | null;
  readonly addresses: BlockList | null;
}

/** What a request is refused for: an operation outside the list, or an address outside it. */
export type AccessDenial = 'operation' | 'address';

/** No list on either axis: the policy of every record without one, shared, never compiled. */
export const OPEN_ACCESS: AccessPolicy = Object.freeze({ operations: null, addresses: null });

/**
 * The lists as matchers. Stored lists were validated on the way in; should a stored entry not parse
 * (a record written by hand), it is left out, which only narrows the list: a policy fails closed.
 */
export function compileAccessPolicy(lists: AccessLists): AccessPolicy {
  const { allowedOperations, allowedAddresses } = lists;
  if (!allowedOperations && !allowedAddresses) return OPEN_ACCESS;
  let addresses: BlockList | null = null;
  if (allowedAddresses) {
    const entries = allowedAddresses.map(parseAddressEntry).filter((entry): entry is AddressEntry => entry !== null);
    addresses = addressMatcher(entries);
  }
  return { operations: allowedOperations ? new Set(allowedOperations) : null, addresses };
}

/**
 * The compiled policy of each record object: key records are frozen and cached by the key resolver
 * (consumer records by their directory), and a change brings a new object, so a policy is parsed
 * once per record, never per request, and goes when its record does.
 */
const compiled = new WeakMap<object, AccessPolicy>();

export function accessPolicyOf(record: AccessLists & object): AccessPolicy {
  if (!record.allowedOperations && !record.allowedAddresses) return OPEN_ACCESS;
  let policy = compiled.get(record);
  if (policy === undefined) {
    policy = compileAccessPolicy(record);
    compiled.set(record, policy);
  }
  return policy;
}

/** What of a request a policy looks at. */
export interface AccessAttempt {
  /** The operation id the request names (operation-ids.ts); null when it names none a policy lists. */
  operationId: string | null;
  /** The client address the limits use (src/gateway/client-address.ts). */
  clientAddress: string;
}

function addressAllowed(addresses: BlockList, clientAddress: string): boolean {
  // The resolver hands over an IP, or 'unknown' for a socket without one; neither throws here, but
  // whatever the check cannot read is outside every list.
  try {
    return addresses.check(clientAddress, clientAddress.includes(':') ? 'ipv6' : 'ipv4');
  } catch {
    return false;
  }
}

function operationRefused(policy: AccessPolicy | null, operationId: string | null): boolean {
  return policy !== null && policy.operations !== null && operationId !== null && !policy.operations.has(operationId);
}

function addressRefused(policy: AccessPolicy | null, clientAddress: string): boolean {
  return policy !== null && policy.addresses !== null && !addressAllowed(policy.addresses, clientAddress);
}

/**
 * Why the request is refused, or null: it must satisfy the key's policy and, when the key belongs
 * to a consumer with one, the consumer's too (CONTRACT §4). The operation is judged first, on both
 * policies, as it is what the caller chose; then the address. A request that names no listable
 * operation (an unknown path or method) passes the operation lists: it is answered 404/405 like any
 * other, which tells nothing about the policy. The address lists apply to it all the same.
 */
export function accessDenial(
  attempt: AccessAttempt,
  key: AccessPolicy,
  consumer: AccessPolicy | null = null,
): AccessDenial | null {
  if (operationRefused(key, attempt.operationId) || operationRefused(consumer, attempt.operationId)) return 'operation';
  if (addressRefused(key, attempt.clientAddress) || addressRefused(consumer, attempt.clientAddress)) return 'address';
  return null;
}
