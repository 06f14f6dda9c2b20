/**
 * Where a key's windows live. A key of no consumer keeps them under its own id (Redis hash tag
 * `{key_…}`). A key of a consumer keeps them beside its consumer's windows: on a Redis Cluster the
 * script that decides a request reads and writes both, so both must hash to one slot, and the hash
 * tag of every window of a consumer's keys is the consumer id. The id returned closes the consumer's
 * tag and opens the key's own braces, so the Redis key reads `<ns>:rl:{con_…}:k:{key_…}`: Redis hashes
 * the first braces only (the consumer's), and the key id stays readable in the name.
 *
 * The in-process limiter uses the same string as its map key, so both stores move a key's windows
 * the same way when it changes consumer (KeyLimiter.moveWindows).
 */
export function windowsIdOf(keyId: string, consumerId?: string | null): string {
  return consumerId ? `${consumerId}}:k:{${keyId}` : keyId;
}

/** The windows id of a key record. */
export function windowsIdOfKey(record: { id: string; consumerId?: string }): string {
  return windowsIdOf(record.id, record.consumerId);
}
