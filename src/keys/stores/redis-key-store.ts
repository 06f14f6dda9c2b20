import { randomBytes } from 'node:crypto';
import { setImmediate as turnOfEventLoop } from 'node:timers/promises';
import { defineLuaScript, type LuaCaller, type LuaScript } from '../../shared/redis/lua-script';
import type { RedisClient } from '../../shared/redis/redis';
import { ChangeFeed } from '../../shared/redis/change-feed';
import { LOSS_CHECK_HEALTH, RESTORE_UNLOCK } from '../../shared/redis/loss-check';
import { Listeners } from '../../shared/listeners';
import {
  applyPatch,
  applyRevoke,
  applyRotate,
  byCreation,
  decodeRecord,
  encodeRecord,
  hashesOf,
} from '../record-changes';
import {
  GET_MANY_SCRIPT,
  IMPORT_BATCH_SCRIPT,
  RESTORE_MISSING_SCRIPT,
  UNDO_IMPORT_SCRIPT,
} from './redis-key-recovery-scripts';
import {
  IMPORT_BATCH,
  recordScriptArgs,
  redisKeyImport,
  RECORDS_PER_READ,
  withRetries,
  type RedisImportResult,
} from './redis-key-import';
import {
  bumpIssuedMarkLua,
  markOfMessage,
  parseIssuedMark,
  SCAN_BATCH,
  SCAN_HASHES_SCRIPT,
  START_ISSUED_MARK_SCRIPT,
} from './redis-issued-marks';
import {
  ConsumerClosed,
  type ApiKeyRecord,
  type KeyChange,
  type KeyPatch,
  type KeyRotation,
  type KeyStore,
  type StoreIssuedMark,
} from '../types';

export interface RedisKeyStoreOptions {
  /** Prefix of every Redis key and channel (config `redis.namespace`). */
  namespace: string;
  /**
   * Connection for SUBSCRIBE. A client is used as given and left open on close; a factory's client
   * and the default (`duplicateForSubscribe(redis)`) are the store's and closed on close.
   */
  subscriber?: RedisClient | (() => Promise<RedisClient>);
}

/**
 * Redis layout. Every key carries the hash tag `{k}`, so all of them live in one slot and a script
 * may touch several of them on Redis Cluster too.
 *
 *   <ns>:keys:{k}:by-hash   HASH  sha256 hex → record JSON (the record lives under its hash, so the
 *                                 hot-path lookup is one HGET; a rotated key's record lives under
 *                                 both its current and its previous hash, so either secret is one HGET)
 *   <ns>:keys:{k}:by-id     HASH  key id → sha256 hex
 *   <ns>:keys:{k}:issued    HASH  epoch, seq: how far the hashes have come (redis-issued-marks.ts)
 *   <ns>:keys:{k}:consumer-closed:<con_…>  HASH holder → 1 (PEXPIRE): a consumer being deleted, closed
 *                                 to keys (closeConsumer); in the records' slot, so the scripts that
 *                                 write a record check it in the same step on a Cluster too
 *   <ns>:key-changes        channel of KeyChange JSON (with the mark), published by every mutation
 *
 * The plaintext key is never sent to Redis. `by-hash` doubles as the list of all keys (the entries
 * under a record's current hash).
 */
export function redisKeyLayout(namespace: string) {
  return {
    /** An import's journal (redis-key-import.ts): id → state before the import, '' for none; gone once it ends. */
    importJournal: (token: string) => `${namespace}:keys:{k}:import-journal:${token}`,
    byHash: `${namespace}:keys:{k}:by-hash`,
    byId: `${namespace}:keys:{k}:by-id`,
    issued: `${namespace}:keys:{k}:issued`,
    /** Holders of a consumer's deletion (closeConsumer); gone when none holds it. */
    consumerClosed: (consumerId: string) => `${namespace}:keys:{k}:consumer-closed:${consumerId}`,
    channel: `${namespace}:key-changes`,
    /** Set once key records exist here: its absence beside a non-empty local copy means Redis lost them. */
    epoch: `${namespace}:keys:{k}:epoch`,
    /** Held (SET NX PX) by the one instance restoring lost records, so many noticing restore once. */
    restoreLock: `${namespace}:keys:{k}:restore-lock`,
    /**
     * Records ever inserted or imported (INCRBY in the same script). Redis only grows it, so a value
     * below one seen before means Redis went back in time: a failover to a replica that missed writes.
     */
    writes: `${namespace}:keys:{k}:writes`,
    /** Written before WAIT after an admin write (keys/durability/write-replication.ts); in the records' slot. */
    replicationProbe: `${namespace}:keys:{k}:replication-probe`,
  };
}

/** The refusal of a write into a consumer being deleted, as the scripts answer it. */
const CONSUMER_CLOSED_REPLY = 'consumer-closed';

/**
 * Inserts a record under its hash and id, unless either exists or the record's consumer is being
 * deleted (its closed set exists); bumps the issued mark and publishes the change with it, in one
 * script: whoever reads the mark after this sees the creation counted.
 * KEYS: 1 by-hash, 2 by-id, 3 issued, 4 writes (the loss check's counter), 5 the consumer's closed set.
 * ARGV: 1 hash, 2 id, 3 JSON, 4 channel, 5 epoch candidate, 6 consumer id ('' for none).
 */
const INSERT_SCRIPT = `
if ARGV[6] ~= '' and redis.call('EXISTS', KEYS[5]) == 1 then return redis.error_reply('ERR ${CONSUMER_CLOSED_REPLY} ' .. ARGV[6]) end
if redis.call('HEXISTS', KEYS[2], ARGV[2]) == 1 then return redis.error_reply('ERR key id already exists') end
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then return redis.error_reply('ERR key hash already exists') end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
redis.call('HSET', KEYS[2], ARGV[2], ARGV[1])${bumpIssuedMarkLua('KEYS[3]', 'ARGV[5]')}
redis.call('INCRBY', KEYS[4], 1)
redis.call('PUBLISH', ARGV[4], cjson.encode({id = ARGV[2], hash = ARGV[1], epoch = epoch, seq = seq}))
return 1`;

/**
 * Compare-and-set of one record: writes only if the stored JSON is still what the caller read, so
 * concurrent updates from several admin instances never lose one another. The record is written under
 * each of its hashes (current, previous), hashes it no longer has are dropped, and one change per
 * hash touched is published so every cache drops each of them.
 *
 * Every write bumps the issued mark (a rotation adds a hash), published with each change. A write
 * that moves the key into a consumer being deleted (its closed set exists) is refused.
 *
 * KEYS: 1 by-hash, 2 by-id, 3 issued, 4 the closed set of the consumer moved into.
 * ARGV: 1 hash read, 2 JSON read, 3 new JSON, 4 channel, 5 id, 6 new current hash,
 *       7 N, 8 epoch candidate, 9 consumer moved into ('' for no move into one),
 *       10..9+N hashes to write, then hashes to drop.
 */
const REPLACE_SCRIPT = `
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then return 0 end
if ARGV[9] ~= '' and redis.call('EXISTS', KEYS[4]) == 1 then return redis.error_reply('ERR ${CONSUMER_CLOSED_REPLY} ' .. ARGV[9]) end
local n = tonumber(ARGV[7])
for i = 10, 9 + n do
  local other = redis.call('HGET', KEYS[1], ARGV[i])
  if other and other ~= ARGV[2] then return redis.error_reply('ERR key hash already exists') end
end
for i = 10 + n, #ARGV do redis.call('HDEL', KEYS[1], ARGV[i]) end
for i = 10, 9 + n do redis.call('HSET', KEYS[1], ARGV[i], ARGV[3]) end
redis.call('HSET', KEYS[2], ARGV[5], ARGV[6])${bumpIssuedMarkLua('KEYS[3]', 'ARGV[8]')}
for i = 10, #ARGV do redis.call('PUBLISH', ARGV[4], cjson.encode({id = ARGV[5], hash = ARGV[i], epoch = epoch, seq = seq})) end
return 1`;

/**
 * Adds a holder to a consumer's closed set (a hash of holders: hash commands are what the gateway's
 * ACL allows, config/redis/gateway-acl.txt) and sets how long the set lasts from now; returns 1 when
 * the holder was in it already. KEYS: 1 the closed set. ARGV: 1 holder token, 2 hold ms.
 */
const CLOSE_CONSUMER_SCRIPT = `
local held = redis.call('HSET', KEYS[1], ARGV[1], '1') == 0
redis.call('PEXPIRE', KEYS[1], ARGV[2])
if held then return 1 end
return 0`;

/** A Redis error that is a script's refusal of a write into a consumer being deleted, as ConsumerClosed. */
function consumerClosedOf(err: unknown): unknown {
  const match = new RegExp(`${CONSUMER_CLOSED_REPLY} (\\S+)`).exec((err as Error)?.message ?? '');
  return match ? new ConsumerClosed(match[1]!) : err;
}

/** Record by id in one round trip: both keys are declared, so this is legal on Cluster. */
const GET_BY_ID_SCRIPT = `
local hash = redis.call('HGET', KEYS[1], ARGV[1])
if not hash then return false end
return redis.call('HGET', KEYS[2], hash)`;

const MAX_CAS_ATTEMPTS = 20;

/** Records per restore script: keeps each one short, so Redis never stalls on a large restore. */
const RESTORE_BATCH = 500;

/** Entries per HSCAN step of the ids (about 30 bytes each, so a step is well under a millisecond). */
const IDS_PER_SCAN = 1000;

/** Attempts at one HSCAN step of a full read (listing, export, durable copy). */
const READ_ATTEMPTS = 3;

/** What the loss check reads in one round trip. */
export interface KeyStoreHealth {
  markerPresent: boolean;
  records: number;
  /** The `writes` counter (0 when absent). */
  writes: number;
}

/**
 * A proposal for the issued mark's epoch, fresh on every call: the first script to find none sets
 * it, and a mark that is lost (with Redis's data) can never come back under an epoch seen before.
 */
function newEpoch(): string {
  return randomBytes(8).toString('hex');
}

/** Every script the store runs; KEYS and ARGV of each are described beside its source. */
const SCRIPTS = {
  insert: defineLuaScript<number>('asgKeyStoreInsert', INSERT_SCRIPT, 5),
  replace: defineLuaScript<number>('asgKeyStoreReplace', REPLACE_SCRIPT, 4),
  closeConsumer: defineLuaScript<number>('asgKeyStoreCloseConsumer', CLOSE_CONSUMER_SCRIPT, 1),
  getById: defineLuaScript<string | null>('asgKeyStoreGetById', GET_BY_ID_SCRIPT, 2),
  // Five keys, then one closed set a record: the count varies with the batch.
  importBatch: defineLuaScript<[number, ...string[]]>('asgKeyStoreImportBatch', IMPORT_BATCH_SCRIPT),
  undoImport: defineLuaScript<number>('asgKeyStoreUndoImport', UNDO_IMPORT_SCRIPT, 4),
  getMany: defineLuaScript<Array<string | null>>('asgKeyStoreGetMany', GET_MANY_SCRIPT, 2),
  restoreMissing: defineLuaScript<string[]>('asgKeyStoreRestoreMissing', RESTORE_MISSING_SCRIPT, 3),
  // The loss check's, the consumers' too (shared/redis/loss-check.ts).
  health: LOSS_CHECK_HEALTH,
  unlock: RESTORE_UNLOCK,
  startIssuedMark: defineLuaScript<unknown>('asgKeyStoreStartIssuedMark', START_ISSUED_MARK_SCRIPT, 1),
  scanHashes: defineLuaScript<string[]>('asgKeyStoreScanHashes', SCAN_HASHES_SCRIPT, 1),
};

type KeyStoreScripts = {
  [name in keyof typeof SCRIPTS]: (typeof SCRIPTS)[name] extends LuaScript<infer Reply> ? LuaCaller<Reply> : never;
};

function scriptsOn(redis: RedisClient): KeyStoreScripts {
  return Object.fromEntries(
    Object.entries(SCRIPTS).map(([name, script]) => [name, script.on(redis)]),
  ) as KeyStoreScripts;
}

function isKeyChange(value: unknown): value is KeyChange {
  const v = value as Partial<KeyChange> | null;
  return typeof v === 'object' && v !== null && typeof v.id === 'string' && typeof v.hash === 'string';
}

/** The key store every gateway instance shares. Construct with `RedisKeyStore.open` to be subscribed on return. */
export class RedisKeyStore implements KeyStore {
  private readonly layout: ReturnType<typeof redisKeyLayout>;
  private readonly scripts: KeyStoreScripts;
  private readonly changeListeners = new Listeners<[KeyChange]>();
  /** The change feed (shared/redis/change-feed.ts): its messages, and resyncs after it may have missed some. */
  private readonly feed: ChangeFeed;
  private closed = false;

  constructor(
    private readonly redis: RedisClient,
    private readonly options: RedisKeyStoreOptions,
  ) {
    this.layout = redisKeyLayout(options.namespace);
    this.scripts = scriptsOn(redis);
    this.feed = new ChangeFeed(redis, { channel: this.layout.channel, subscriber: options.subscriber });
    this.feed.onMessage((message) => this.receive(message));
  }

  /** A store whose change subscription is active, so no change published after this returns is missed. */
  static async open(redis: RedisClient, options: RedisKeyStoreOptions): Promise<RedisKeyStore> {
    const store = new RedisKeyStore(redis, options);
    try {
      await store.ready();
    } catch (err) {
      await store.close().catch(() => {});
      throw err;
    }
    return store;
  }

  /** Resolves once SUBSCRIBE succeeded; rejects if the subscriber could not be set up. */
  async ready(): Promise<void> {
    await this.feed.ready();
  }

  async insert(record: ApiKeyRecord): Promise<void> {
    const { byHash, byId, issued, writes, channel } = this.layout;
    const consumer = record.consumerId ?? '';
    await this.scripts
      .insert(
        [byHash, byId, issued, writes, this.layout.consumerClosed(consumer)],
        [record.hash, record.id, encodeRecord(record), channel, newEpoch(), consumer],
      )
      .catch((err: unknown) => Promise.reject(consumerClosedOf(err)));
    this.changeListeners.emit({ id: record.id, hash: record.hash });
  }

  async findByHash(hash: string): Promise<ApiKeyRecord | null> {
    const json = await this.redis.hget(this.layout.byHash, hash);
    return json === null ? null : decodeRecord(json);
  }

  async get(id: string): Promise<ApiKeyRecord | null> {
    const json = await this.scripts.getById([this.layout.byId, this.layout.byHash], [id]);
    return typeof json === 'string' ? decodeRecord(json) : null;
  }

  /**
   * Every record, oldest first, each with its `hash`: the admin layer strips it (`withoutHash`).
   * Read in HSCAN steps (scanRecords), never one HGETALL, so no command holds Redis for long.
   */
  async list(): Promise<ApiKeyRecord[]> {
    const records: ApiKeyRecord[] = [];
    await this.scanRecords((batch) => void records.push(...batch));
    return records.sort(byCreation);
  }

  /**
   * HSCAN over by-hash, RECORDS_PER_READ entries a step, the event loop turning between steps. A
   * rotated key sits under its previous hash too and HSCAN may return an entry twice (while Redis
   * resizes the hash): each record is given once. Every entry holds its record's current state, so
   * one under the previous hash counts too: a record rotated once during the scan is still given
   * (its former hash, now the previous, was there throughout), which a consumer's delete relies on
   * (every key of the consumer read). Only one rotated twice during the scan may be missed.
   */
  async scanRecords(onBatch: (records: ApiKeyRecord[]) => void | Promise<void>): Promise<void> {
    const seen = new Set<string>();
    let cursor = '0';
    do {
      // A step whose answer did not come is read again: a listing of 100,000 keys should not fail for one slow answer.
      const [next, entries] = await withRetries(
        () => this.redis.hscan(this.layout.byHash, cursor, 'COUNT', RECORDS_PER_READ),
        READ_ATTEMPTS,
      );
      cursor = next;
      const records: ApiKeyRecord[] = [];
      for (let i = 0; i < entries.length; i += 2) {
        const record = decodeRecord(entries[i + 1]!);
        if ((record.hash !== entries[i] && record.previousHash !== entries[i]) || seen.has(record.id)) continue;
        seen.add(record.id);
        records.push(record);
      }
      if (records.length > 0) await onBatch(records);
      await turnOfEventLoop();
    } while (cursor !== '0');
  }

  /** The records of these ids (absent ones are missing from the map), in one round trip. */
  async getMany(ids: readonly string[]): Promise<Map<string, ApiKeyRecord>> {
    const found = new Map<string, ApiKeyRecord>();
    if (ids.length === 0) return found;
    const jsons = await this.scripts.getMany([this.layout.byId, this.layout.byHash], [...ids]);
    jsons.forEach((json, i) => {
      if (typeof json === 'string') found.set(ids[i]!, decodeRecord(json));
    });
    return found;
  }

  update(id: string, patch: KeyPatch, updatedAt: string): Promise<ApiKeyRecord | null> {
    return this.replace(id, (record) => applyPatch(record, patch, updatedAt));
  }

  revoke(id: string, revokedAt: string): Promise<ApiKeyRecord | null> {
    return this.replace(id, (record) => applyRevoke(record, revokedAt));
  }

  rotate(id: string, rotation: KeyRotation, rotatedAt: string): Promise<ApiKeyRecord | null> {
    return this.replace(id, (record) => applyRotate(record, rotation, rotatedAt));
  }

  /**
   * In batches of a few hundred records, each one script of a few milliseconds, with a journal that
   * undoes the batches written when a later one fails (redis-key-import.ts): all or nothing at any
   * size, and never a command near the command timeout.
   */
  importRecords(records: ApiKeyRecord[]): Promise<RedisImportResult> {
    return redisKeyImport(records, {
      layout: this.layout,
      importBatch: this.scripts.importBatch,
      undoBatch: this.scripts.undoImport,
      getMany: (ids) => this.getMany(ids),
      del: async (key) => void (await this.redis.del(key)),
      scanJournal: (key, cursor) => this.redis.hscan(key, cursor, 'COUNT', IMPORT_BATCH),
      newEpoch,
    });
  }

  async closeConsumer(consumerId: string, token: string, holdMs: number): Promise<boolean> {
    return (
      (await this.scripts.closeConsumer(
        [this.layout.consumerClosed(consumerId)],
        [token, Math.max(1, Math.ceil(holdMs))],
      )) === 1
    );
  }

  async reopenConsumer(consumerId: string, token: string): Promise<void> {
    await this.redis.hdel(this.layout.consumerClosed(consumerId), token);
  }

  /** Writes the records whose id and hashes are all absent (after data loss); returns the ids written. */
  async restoreMissing(records: ApiKeyRecord[]): Promise<string[]> {
    const { byHash, byId, channel } = this.layout;
    const restored: string[] = [];
    for (let at = 0; at < records.length; at += RESTORE_BATCH) {
      const batch = records.slice(at, at + RESTORE_BATCH);
      const ids = await this.scripts.restoreMissing(
        [byHash, byId, this.layout.issued],
        [channel, newEpoch(), ...batch.flatMap(recordScriptArgs)],
      );
      restored.push(...(ids as string[]));
    }
    return restored;
  }

  /** Is the epoch marker there, and how many key records does Redis hold. */
  async health(): Promise<KeyStoreHealth> {
    const [marker, records, writes] = (await this.scripts.health(
      [this.layout.epoch, this.layout.byId, this.layout.writes],
      [],
    )) as [number, number, number];
    return { markerPresent: marker === 1, records, writes };
  }

  /** Sets the epoch marker unless present; true when this call set it. */
  async setMarker(epoch: string): Promise<boolean> {
    return (await this.redis.set(this.layout.epoch, epoch, 'NX')) === 'OK';
  }

  /** HLEN of the ids: one command however many keys there are. */
  count(): Promise<number> {
    return this.redis.hlen(this.layout.byId);
  }

  /** The ids Redis holds, in HSCAN steps (never one HKEYS of every key). */
  async ids(): Promise<string[]> {
    const ids: string[] = [];
    let cursor = '0';
    do {
      const [next, entries] = await withRetries(
        () => this.redis.hscan(this.layout.byId, cursor, 'COUNT', IDS_PER_SCAN),
        READ_ATTEMPTS,
      );
      cursor = next;
      for (let i = 0; i < entries.length; i += 2) ids.push(entries[i]!);
      await turnOfEventLoop();
    } while (cursor !== '0');
    return [...new Set(ids)];
  }

  /** Takes the restore lock for `ttlMs` unless another holder has it. */
  async lockRestore(owner: string, ttlMs: number): Promise<boolean> {
    return (await this.redis.set(this.layout.restoreLock, owner, 'PX', ttlMs, 'NX')) === 'OK';
  }

  async unlockRestore(owner: string): Promise<void> {
    await this.scripts.unlock([this.layout.restoreLock], [owner]);
  }

  onChange(listener: (change: KeyChange) => void): () => void {
    return this.changeListeners.add(listener);
  }

  /** One HMGET (commandstats counts every call inside a script too, so a script would cost more). */
  async issuedMark(options: { countHashes?: boolean } = {}): Promise<StoreIssuedMark> {
    const { issued, byHash } = this.layout;
    const mark =
      parseIssuedMark(await this.redis.hmget(issued, 'epoch', 'seq')) ??
      parseIssuedMark(await this.scripts.startIssuedMark([issued], [newEpoch()]));
    if (!mark) throw new Error('the issued-key mark could not be started');
    if (options.countHashes) mark.hashes = await this.redis.hlen(byHash);
    return mark;
  }

  /** HSCAN over by-hash in steps of SCAN_BATCH, hashes only; a hash written meanwhile may be missed (its change is not). */
  async scanIssuedHashes(onBatch: (hashes: string[]) => void): Promise<void> {
    let cursor = '0';
    do {
      const [next, ...hashes] = (await this.scripts.scanHashes(
        [this.layout.byHash],
        [cursor, String(SCAN_BATCH)],
      )) as string[];
      cursor = next ?? '0';
      if (hashes.length > 0) onBatch(hashes);
    } while (cursor !== '0');
  }

  onResync(listener: () => void): () => void {
    return this.feed.onResync(listener);
  }

  /** Unsubscribes and closes the connections this store created; the command connection is the caller's. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.changeListeners.clear();
    await this.feed.close();
  }

  /** Read, transform, compare-and-set; retried when another writer got in between. */
  private async replace(id: string, transform: (record: ApiKeyRecord) => ApiKeyRecord): Promise<ApiKeyRecord | null> {
    for (let attempt = 0; attempt < MAX_CAS_ATTEMPTS; attempt++) {
      const json = await this.scripts.getById([this.layout.byId, this.layout.byHash], [id]);
      if (typeof json !== 'string') return null;
      const current = decodeRecord(json);
      const next = transform(current);
      if (next === current) return current;
      const { byHash, byId, issued, channel } = this.layout;
      const kept = hashesOf(next);
      const dropped = hashesOf(current).filter((hash) => !kept.includes(hash));
      // Only a move into a consumer is checked: a key staying where it is may still be renamed or revoked.
      const movedInto = next.consumerId !== undefined && next.consumerId !== current.consumerId ? next.consumerId : '';
      const args = [
        current.hash,
        json,
        encodeRecord(next),
        channel,
        next.id,
        next.hash,
        String(kept.length),
        newEpoch(),
        movedInto,
        ...kept,
        ...dropped,
      ];
      const written = await this.scripts
        .replace([byHash, byId, issued, this.layout.consumerClosed(movedInto)], args)
        .catch((err: unknown) => Promise.reject(consumerClosedOf(err)));
      if (written === 1) {
        for (const hash of [...kept, ...dropped]) this.changeListeners.emit({ id: next.id, hash });
        return next;
      }
    }
    throw new Error(`key ${id} kept changing under concurrent updates; gave up after ${MAX_CAS_ATTEMPTS} attempts`);
  }

  private receive(message: string): void {
    if (this.closed) return;
    let change: unknown;
    try {
      change = JSON.parse(message);
    } catch {
      return;
    }
    if (!isKeyChange(change)) return;
    const mark = markOfMessage(change as { epoch?: unknown; seq?: unknown });
    const flags = change as { removed?: unknown; restored?: unknown };
    const heard: KeyChange = { id: change.id, hash: change.hash };
    if (mark) heard.mark = mark;
    if (flags.removed === true) heard.removed = true;
    if (flags.restored === true) heard.restored = true;
    this.changeListeners.emit(heard);
  }
}
