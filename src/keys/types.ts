import type { WindowLimits } from '../limits/types';

/** What the store keeps of a key: never the key itself, only its hash. */
export interface ApiKeyRecord {
  id: string;
  name: string;
  plan: string;
  /** The key's own limits; null means the plan's. */
  limits: WindowLimits | null;
  /** SHA-256 of the full key, hex. */
  hash: string;
  createdAt: string;
  updatedAt: string;
  revokedAt: string | null;
  /** From this instant the key is refused with expired_api_key; null: never. */
  expiresAt: string | null;
  /** SHA-256 of the secret a rotation replaced, still resolving to this record; null when none. */
  previousHash: string | null;
  /** Until when the previous secret is admitted; after that it gets expired_api_key. */
  previousKeyExpiresAt: string | null;
  /** Day of the month (1..28) the key's month window starts on, 00:00 UTC; absent means 1. */
  billingDay?: number;
  /** The consumer (`con_…`) whose shared windows this key also counts in; absent: none. */
  consumerId?: string;
  /** Access policy (CONTRACT §4, src/access): the operation ids this key may call; absent: every one. */
  allowedOperations?: string[];
  /** Access policy: the addresses and CIDR ranges this key may call from; absent: anywhere. */
  allowedAddresses?: string[];
}

export interface NewKeyInput {
  name: string;
  plan: string;
  limits?: WindowLimits | null;
  expiresAt?: string | null;
  /** 1..28; absent: the 1st. */
  billingDay?: number | null;
  /** A consumer that exists; absent or null: none. */
  consumerId?: string | null;
  /** Validated by src/access/access-lists.ts; absent or null: no list. */
  allowedOperations?: unknown;
  allowedAddresses?: unknown;
}

export interface KeyPatch {
  name?: string;
  plan?: string;
  limits?: WindowLimits | null;
  /** null removes the expiry. */
  expiresAt?: string | null;
  /** Moves the key to this consumer; null: to none. */
  consumerId?: string | null;
  /** Access policy lists (src/access/access-lists.ts); null removes a list, absent keeps it. */
  allowedOperations?: string[] | null;
  allowedAddresses?: string[] | null;
}

/** A patch as the admin API hands it over: the access lists not checked yet (the key service checks them). */
export type KeyPatchRequest = Omit<KeyPatch, 'allowedOperations' | 'allowedAddresses'> & {
  allowedOperations?: unknown;
  allowedAddresses?: unknown;
};

/** A rotation: the new secret's hash, and how long the current secret stays admitted. */
export interface KeyRotation {
  hash: string;
  previousKeyExpiresAt: string;
}

/** A change another instance must see: its cache entry for `hash` is stale. */
export interface KeyChange {
  id: string;
  hash: string;
  /** Where the store's issued hashes stood after this write (shared stores only). */
  mark?: IssuedMark;
  /** The record is gone: an import that had created it was undone (a durable copy forgets it). */
  removed?: true;
  /**
   * A restore after data loss put the record back as a durable copy held it: nothing a client did
   * changed it. A cache re-reads it on next use but keeps what it held should that read fail, as
   * when its TTL runs out; every other change drops the cached record at once (a revocation must
   * not be served from a cache).
   */
  restored?: true;
}

/**
 * How far the store's set of issued key hashes has come: `seq` counts the writes that may have added
 * a hash (creations, rotations, any record change), within `epoch`, which is new whenever the store
 * lost that count (its data). A filter that has applied every change up to `seq` of `epoch` knows
 * every hash the store had when the mark was read.
 */
export interface IssuedMark {
  epoch: string;
  seq: number;
}

/** The mark as read from the store, with the number of hashes it holds when asked (for sizing a filter). */
export interface StoreIssuedMark extends IssuedMark {
  hashes?: number;
}

/** What an import did: records created or brought to the imported state, and those already in it. */
export interface ImportResult {
  imported: number;
  unchanged: number;
  /** The ids of the records created or changed (the audit entry names them). */
  ids: string[];
  /**
   * Keys that were here under another consumer (or none) and now name a new one (or none): their
   * windows and ban follow them, as a PATCH's move does (KeyService.importBackup).
   */
  moved?: KeyMove[];
}

/** A key that changed consumer; undefined: no consumer. */
export interface KeyMove {
  id: string;
  from: string | undefined;
  to: string | undefined;
}

/**
 * A key write refused because it would put a key into a consumer whose deletion is under way or
 * has just been done (KeyStore.closeConsumer): the consumer is, for this key, gone.
 */
export class ConsumerClosed extends Error {
  constructor(readonly consumerId: string) {
    super(`consumer ${consumerId} is being deleted`);
    this.name = 'ConsumerClosed';
  }
}

/** An import refused because a record's secret (hash) belongs to another key id here. */
export class KeyImportConflict extends Error {
  constructor(
    readonly id: string,
    readonly otherId: string,
    message = `key ${id} has a secret that key ${otherId} already holds here`,
  ) {
    super(message);
    this.name = 'KeyImportConflict';
  }
}

/**
 * Where keys live: Redis (shared by every instance) or in process (persisted under DATA_DIR).
 * Every mutation publishes a KeyChange so each instance's cache drops the entry.
 */
export interface KeyStore {
  /** Stores a record whose hash the caller computed; the caller holds the only copy of the key. */
  insert(record: ApiKeyRecord): Promise<void>;
  /** The record whose current or previous secret has this hash. */
  findByHash(hash: string): Promise<ApiKeyRecord | null>;
  get(id: string): Promise<ApiKeyRecord | null>;
  list(): Promise<ApiKeyRecord[]>;
  /**
   * Optional (a store without it is read with list()). Every record, in batches of a few hundred
   * in no set order, the event loop turning between them: what an export and a durable copy use.
   */
  /** Optional: how many keys the store holds, in one command (a development start asks whether there are any). */
  count?(): Promise<number>;
  scanRecords?(onBatch: (records: ApiKeyRecord[]) => void | Promise<void>): Promise<void>;
  update(id: string, patch: KeyPatch, updatedAt: string): Promise<ApiKeyRecord | null>;
  revoke(id: string, revokedAt: string): Promise<ApiKeyRecord | null>;
  /**
   * Gives the key a new secret (hash); the current one becomes the previous, an older previous one
   * stops resolving. A revoked key comes back unchanged. Both hashes resolve to the one record.
   */
  rotate(id: string, rotation: KeyRotation, rotatedAt: string): Promise<ApiKeyRecord | null>;
  /**
   * Brings every record to exactly the given state, ids kept, all or nothing (a backup's import).
   * Records already in that state are counted unchanged, so importing twice changes nothing.
   * Throws KeyImportConflict when a hash belongs to another id. A record revoked here stays
   * revoked (at its own instant) whatever the imported state says: an older backup never revives it.
   */
  importRecords(records: ApiKeyRecord[]): Promise<ImportResult>;
  /**
   * Optional: closes a consumer to keys for `holdMs` from now (its deletion is under way). Until
   * every holder reopened it or the hold ends, an insert naming it and an update moving a key into
   * it throw ConsumerClosed, decided in the same atomic step as the write (a script on Redis).
   * `token` names the holder; several may hold one consumer. Returns whether `token` already held
   * it (false when the hold had run out meanwhile).
   */
  closeConsumer?(consumerId: string, token: string, holdMs: number): Promise<boolean>;
  /** Optional, with closeConsumer: `token` no longer holds the consumer closed. */
  reopenConsumer?(consumerId: string, token: string): Promise<void>;
  /** Called for every change, from this instance or another; returns an unsubscribe function. */
  onChange(listener: (change: KeyChange) => void): () => void;
  /**
   * Optional. Called when changes may have been missed (the change subscription dropped and came
   * back), so a cache should drop every entry. Returns an unsubscribe function.
   */
  onResync?(listener: () => void): () => void;
  /**
   * Optional, for stores shared by instances (Redis): the mark now, in one command (HMGET; the hash
   * count costs one more). Together with
   * the marks on changes it tells an instance whether its filter of issued hashes may be behind.
   */
  issuedMark?(options?: { countHashes?: boolean }): Promise<StoreIssuedMark>;
  /** Optional, with issuedMark: every hash that resolves to a record, in bounded batches. */
  scanIssuedHashes?(onBatch: (hashes: string[]) => void): Promise<void>;
  close(): Promise<void>;
}
