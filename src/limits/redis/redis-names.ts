import type { KeyRef } from '../types';

/**
 * The names of the Redis keys of the limiter: the one place that builds them (and the only place,
 * with the Redis stores of src/keys/stores/, that writes a Cluster hash tag).
 *
 * A key of no consumer keeps its windows under its own id as hash tag: `<ns>:rl:{key_…}`. A key of a
 * consumer keeps them beside its consumer's: the script that decides one of its requests reads and
 * writes both, so on a Redis Cluster both must hash to one slot, and the hash tag of every window of
 * a consumer's keys is the consumer id. The name closes the consumer's tag and opens the key's own
 * braces, `<ns>:rl:{con_…}:k:{key_…}`: Redis hashes the first braces only (the consumer's), and the
 * key id stays readable. Beside that hash, with the same tag (so in the same slot):
 *
 *   <hash>:mo    HASH  w, c, k: the key's billing month's start, count and credits
 *   <hash>:log   ZSET  its sliding minute's admissions
 *   <hash>:if    ZSET  its in-flight leases (maxInFlight), scored by expiry
 *
 * A consumer's own windows: `<ns>:rl:{con_…}:c` (HASH mw, mc, dw, dc: its minute and day, as a key's
 * without a ban), `:c:mo` (its month) and `:c:log` (its sliding minute, only with a perMinute).
 * The sorted set of banned keys by ban end, `<ns>:rl:bans`, sits in a slot of its own.
 */

/** Every Redis key of one key's windows. */
export interface KeyRedisNames {
  /** The hash: mw, mc (minute index and count), dw, dc (day), bu (banned until), rc, re (refusals toward a ban). */
  hash: string;
  /** The sliding minute's log of admissions. */
  log: string;
  /** The billing month: w, c, k. */
  month: string;
  /** The in-flight leases (maxInFlight). */
  leases: string;
  /** The key's member in the sorted set of active bans. */
  banMember: string;
}

/** Every Redis key of one consumer's own windows. */
export interface ConsumerRedisNames {
  hash: string;
  log: string;
  month: string;
}

/** Suffixes of the keys beside a windows hash. */
const MONTH = ':mo';
const LOG = ':log';
const LEASES = ':if';

/** What closes a consumer's hash tag and opens its key's braces in a consumer's key's names. */
const CONSUMER_KEY_MARK = '}:k:{';

/** The part of a key's names after `<ns>:rl:{`: what the bans' sorted set holds as its member too. */
function windowsIdOf(key: KeyRef): string {
  return key.consumerId ? key.consumerId + CONSUMER_KEY_MARK + key.keyId : key.keyId;
}

/**
 * The key id in a windows id (what windowsIdOf builds): months.sqlite rows written before the
 * in-process store kept a consumer's key under its own id name it that way (memory-key-limiter.ts).
 */
export function keyIdOfWindowsId(windowsId: string): string {
  const mark = windowsId.indexOf(CONSUMER_KEY_MARK);
  return mark < 0 ? windowsId : windowsId.slice(mark + CONSUMER_KEY_MARK.length);
}

/** The hash of a key's windows; a bare string is a key of no consumer. */
export function keyLimiterRedisKey(namespace: string, key: string | KeyRef): string {
  return `${namespace}:rl:{${typeof key === 'string' ? key : windowsIdOf(key)}}`;
}

/** The hash holding a key's month count and credits; same hash tag, so same Cluster slot, as its hash. */
export function monthRedisKey(namespace: string, key: string | KeyRef): string {
  return keyLimiterRedisKey(namespace, key) + MONTH;
}

/** The sorted set holding a key's sliding-minute log; same hash tag, so same Cluster slot, as its hash. */
export function slidingLogRedisKey(namespace: string, key: string | KeyRef): string {
  return keyLimiterRedisKey(namespace, key) + LOG;
}

/** The sorted set of a key's in-flight leases; same hash tag as its hash. */
export function leasesRedisKey(namespace: string, key: string | KeyRef): string {
  return keyLimiterRedisKey(namespace, key) + LEASES;
}

/** The hash of a consumer's own minute and day. */
export function consumerWindowsRedisKey(namespace: string, consumerId: string): string {
  return `${namespace}:rl:{${consumerId}}:c`;
}

/**
 * The sorted set of banned keys by ban end, read for the `gateway_active_bans` gauge. It sits in its
 * own slot, so the consume script cannot write it on a Cluster: the store adds a key after the script
 * reports a new ban (a rare second command, not awaited by the request) and removes it on unban.
 */
export function activeBansRedisKey(namespace: string): string {
  return `${namespace}:rl:bans`;
}

/** The hash tag of a Redis key (what Cluster hashes): keys with one tag share a slot. */
export function hashTagOf(name: string): string {
  const open = name.indexOf('{');
  const close = open < 0 ? -1 : name.indexOf('}', open + 1);
  return close > open + 1 ? name.slice(open + 1, close) : name;
}

/** The names of one namespace's limiter keys. */
export class RedisNames {
  readonly bans: string;

  constructor(readonly namespace: string) {
    this.bans = activeBansRedisKey(namespace);
  }

  /** Every Redis key of a key's windows, from its reference. */
  key(key: KeyRef): KeyRedisNames {
    const hash = keyLimiterRedisKey(this.namespace, key);
    return {
      hash,
      log: hash + LOG,
      month: hash + MONTH,
      leases: hash + LEASES,
      banMember: windowsIdOf(key),
    };
  }

  /** The leases of a key alone (a release names nothing else). */
  leases(key: KeyRef): string {
    return leasesRedisKey(this.namespace, key);
  }

  /** Every Redis key of a consumer's own windows. */
  consumer(consumerId: string): ConsumerRedisNames {
    const hash = consumerWindowsRedisKey(this.namespace, consumerId);
    return { hash, log: hash + LOG, month: hash + MONTH };
  }
}
