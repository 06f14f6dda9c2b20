import type { Clock } from '../shared/clock';
import { failsChecksum, hashApiKey, isWellFormedKey } from './key-format';
import { keyStatusAt } from './key-status';
import { IssuedKeys, isIssuedHashSource, type IssuedKeysOptions } from './issued/issued-keys';
import type { ApiKeyRecord, KeyStore } from './types';

export type KeyResolution =
  | { status: 'valid'; record: ApiKeyRecord }
  | { status: 'revoked'; record: ApiKeyRecord }
  | { status: 'expired'; record: ApiKeyRecord }
  /**
   * neverIssued: proven without the store, by the key's own checksum or by the issued-key filter
   * (its anonymous unit may come from a batch).
   */
  | { status: 'invalid'; neverIssued?: boolean };

export interface KeyResolverOptions {
  /** This environment's key prefix (config `keys.prefix`); keys without it never reach the store. */
  prefix: string;
  /** How long a found key (valid or revoked) is served from memory (config `keys.cacheTtlSeconds`). */
  cacheTtlSeconds: number;
  /** How long an unknown key is remembered as unknown (config `keys.negativeCacheTtlSeconds`). */
  negativeCacheTtlSeconds: number;
  /** Bound of each cache (found keys, unknown keys); the least recently used entry goes first. Default 10,000. */
  maxEntries?: number;
  /**
   * The filter of issued key hashes that answers never-issued keys without the store (issued/issued-keys.ts);
   * used when the store is shared and offers marks (Redis). False turns it off.
   */
  issued?: IssuedKeysOptions | false;
}

export const DEFAULT_MAX_CACHE_ENTRIES = 10_000;

/** One answer for every key proven never issued by its checksum: a flood of them allocates nothing here. */
const NEVER_ISSUED: KeyResolution = Object.freeze({ status: 'invalid', neverIssued: true });

interface FoundEntry {
  record: ApiKeyRecord;
  expiresAt: number;
}

function freeze(record: ApiKeyRecord): ApiKeyRecord {
  if (record.limits) Object.freeze(record.limits);
  return Object.freeze(record);
}

/**
 * What a record means for the secret presented, now. Computed on every request, cache hit or not:
 * expiry and a rotation's grace period end on the instant, not when the cache entry does.
 */
function resolution(record: ApiKeyRecord | null, hash: string, now: number): KeyResolution {
  if (!record) return { status: 'invalid' };
  const status = keyStatusAt(record, hash, now);
  return status === 'unknown' ? { status: 'invalid' } : { status, record };
}

/**
 * Presented key → record, on the gateway's hot path. A cache hit costs one SHA-256 and a Map
 * lookup, no store call. Entries are dropped the moment the store reports a change to their key
 * (from any instance), so revocations and plan changes apply everywhere without waiting for the TTL;
 * the TTL only bounds staleness when a change notification is lost.
 *
 * Found and unknown keys are cached apart, so a flood of made-up keys cannot push real ones out.
 * Concurrent misses for one key share one store call. Store errors propagate and are not cached,
 * except that a key found before keeps working on its expired entry while the store fails.
 */
export class KeyResolver {
  private readonly found = new Map<string, FoundEntry>();
  private readonly unknown = new Map<string, number>();
  private readonly inflight = new Map<string, Promise<ApiKeyRecord | null>>();
  private readonly maxEntries: number;
  private readonly cacheTtlMs: number;
  private readonly negativeCacheTtlMs: number;
  private readonly unsubscribe: Array<() => void>;
  /** Null with a store that has no marks (in process: every lookup is local anyway). */
  readonly issued: IssuedKeys | null;

  constructor(
    private readonly store: KeyStore,
    private readonly clock: Clock,
    private readonly options: KeyResolverOptions,
  ) {
    this.maxEntries = options.maxEntries ?? DEFAULT_MAX_CACHE_ENTRIES;
    if (!Number.isInteger(this.maxEntries) || this.maxEntries < 1)
      throw new Error('maxEntries must be a positive integer');
    this.cacheTtlMs = options.cacheTtlSeconds * 1000;
    this.negativeCacheTtlMs = options.negativeCacheTtlSeconds * 1000;
    this.unsubscribe = [
      store.onChange((change) => (change.restored ? this.markStale(change.hash) : this.evict(change.hash))),
    ];
    if (store.onResync) this.unsubscribe.push(store.onResync(() => this.markAllStale()));
    this.issued = options.issued !== false && isIssuedHashSource(store) ? new IssuedKeys(store, options.issued) : null;
  }

  /** Resolves once the issued-key filter was first built (at once without one). */
  async ready(): Promise<void> {
    await this.issued?.ready();
  }

  async resolve(presentedKey: string): Promise<KeyResolution> {
    if (!isWellFormedKey(this.options.prefix, presentedKey)) return { status: 'invalid' };
    // A checksum that fails proves the key made up (CONTRACT §4): no cache, filter or store is asked.
    if (failsChecksum(presentedKey, this.options.prefix)) return NEVER_ISSUED;
    const hash = hashApiKey(presentedKey);
    const now = this.clock.now();

    const hit = this.found.get(hash);
    if (hit) {
      // Re-inserted so Map order is least recently used first.
      this.found.delete(hash);
      this.found.set(hash, hit);
      if (hit.expiresAt > now) return resolution(hit.record, hash, now);
      return this.refresh(hash, hit);
    }
    const unknownUntil = this.unknown.get(hash);
    if (unknownUntil !== undefined) {
      if (unknownUntil > now) return { status: 'invalid' };
      this.unknown.delete(hash);
    }
    // A key never issued is not remembered in `unknown`: random keys never repeat, and would only
    // push out the entries that do.
    if (this.issued && (await this.issued.neverIssued(hash))) return { status: 'invalid', neverIssued: true };
    return resolution(await this.lookup(hash), hash, this.clock.now());
  }

  /**
   * An expired entry is asked for again, but kept until the store answers: while the store is
   * unreachable a key that worked keeps working (stale if error), rather than every cached key
   * failing at once when its TTL runs out in the middle of an outage. Evictions from change
   * notifications still drop it at once.
   */
  private async refresh(hash: string, stale: FoundEntry): Promise<KeyResolution> {
    try {
      return resolution(await this.lookup(hash), hash, this.clock.now());
    } catch (err) {
      if (this.found.get(hash) === stale) return resolution(stale.record, hash, this.clock.now());
      throw err;
    }
  }

  /** Drops what is known about one key hash; the next request asks the store. */
  evict(hash: string): void {
    this.found.delete(hash);
    this.unknown.delete(hash);
    // A lookup already under way may have read the old record: its answer must not be cached.
    this.inflight.delete(hash);
  }

  /**
   * A restore put the key's record back (KeyChange.restored): asked for again on its next use, but
   * kept should that fail. The instances hear a restore the moment Redis is back, often before
   * their own command connection is: dropping the entry there answered 503 to a key that worked.
   */
  markStale(hash: string): void {
    const entry = this.found.get(hash);
    if (entry) entry.expiresAt = Number.NEGATIVE_INFINITY;
    this.unknown.delete(hash);
    this.inflight.delete(hash);
  }

  /**
   * After change notifications were lost (the subscription came back, as after a Redis failover):
   * every key is asked for again on its next use, but a key found before keeps working on its entry
   * if the store fails meanwhile, as when a TTL ends in an outage. Dropping the entries instead
   * would refuse every client with 503 while the store is still settling.
   */
  markAllStale(): void {
    for (const entry of this.found.values()) entry.expiresAt = Number.NEGATIVE_INFINITY;
    this.unknown.clear();
    this.inflight.clear();
  }

  clear(): void {
    this.found.clear();
    this.unknown.clear();
    this.inflight.clear();
  }

  /** Entries held now, found and unknown. */
  get size(): number {
    return this.found.size + this.unknown.size;
  }

  /** Stops listening to the store's changes; the store itself is the caller's to close. */
  close(): void {
    for (const off of this.unsubscribe.splice(0)) off();
    this.issued?.close();
    this.clear();
  }

  private lookup(hash: string): Promise<ApiKeyRecord | null> {
    const pending = this.inflight.get(hash);
    if (pending) return pending;

    let fetched: Promise<ApiKeyRecord | null>;
    try {
      fetched = this.store.findByHash(hash);
    } catch (err) {
      fetched = Promise.reject(err);
    }
    const settled: Promise<ApiKeyRecord | null> = fetched.then(
      (record) => {
        const current = this.inflight.get(hash) === settled;
        if (current) this.inflight.delete(hash);
        const frozen = record ? freeze(record) : null;
        if (current) this.remember(hash, frozen);
        return frozen;
      },
      (err: unknown) => {
        if (this.inflight.get(hash) === settled) this.inflight.delete(hash);
        throw err;
      },
    );
    this.inflight.set(hash, settled);
    return settled;
  }

  private remember(hash: string, record: ApiKeyRecord | null): void {
    const now = this.clock.now();
    if (record) {
      this.found.set(hash, { record, expiresAt: now + this.cacheTtlMs });
      evictOldest(this.found, this.maxEntries);
    } else {
      this.found.delete(hash);
      this.unknown.set(hash, now + this.negativeCacheTtlMs);
      evictOldest(this.unknown, this.maxEntries);
    }
  }
}

function evictOldest(map: Map<string, unknown>, maxEntries: number): void {
  while (map.size > maxEntries) {
    const oldest = map.keys().next();
    if (oldest.done) return;
    map.delete(oldest.value);
  }
}
