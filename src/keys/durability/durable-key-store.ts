import { setImmediate as turnOfEventLoop, setTimeout as sleep } from 'node:timers/promises';
import type { KeyReplica } from './key-replica';
import type { LossCheck } from '../../shared/redis/loss-check';
import type { RedisKeyStore } from '../stores/redis-key-store';
import { RECORDS_PER_READ, type RedisImportResult } from '../stores/redis-key-import';
import { hashesOf } from '../record-changes';
import type { ApiKeyRecord, KeyChange, KeyPatch, KeyRotation, KeyStore, StoreIssuedMark } from '../types';

/**
 * Records a transaction of the copy takes during an import (each one fsync, synchronous = FULL):
 * small enough that the listener waits for no transaction long.
 */
const REPLICA_STEP = 500;

/**
 * The Redis key store with this instance's durable copy behind it (CONTRACT §4: keys are never
 * lost with Redis's data). Redis stays the truth whenever it holds a record; a record it lacks is
 * answered from the copy, so a key known before a wipe keeps its answer (served, or its own 401)
 * in the seconds until the loss monitor has written the records back. A change to a record Redis
 * lost (revoke, rotate, update during that time) first puts the record back, then applies.
 *
 * The copy learns of every record from this instance's writes and from the change stream (the
 * changed record is read back from Redis), and from a full read at start and after each reconnect.
 */
export class DurableKeyStore implements KeyStore {
  private readonly offs: Array<() => void>;
  /**
   * Ids whose change arrived, to be read back into the copy in batches (an import of 100,000
   * records publishes as many changes): true when the change said the record is gone.
   */
  private readonly pending = new Map<string, boolean>();
  private following = false;
  private closed = false;
  /**
   * Ids of this instance's imports in progress: their changes need no read-back (the import writes
   * the copy itself before it answers, and nothing when it is undone).
   */
  private readonly importing = new Map<string, number>();

  constructor(
    private readonly redis: RedisKeyStore,
    private readonly replica: KeyReplica,
    private readonly monitor: LossCheck<ApiKeyRecord>,
    private readonly onCopyFailed: (err: unknown) => void,
  ) {
    this.offs = [
      redis.onChange((change) => this.follow(change)),
      redis.onResync(() => void this.monitor.checkSoon().then(() => this.copyAll())),
    ];
  }

  /** Checks for loss (restoring if needed), then copies every record Redis holds; starts the periodic check. */
  async start(): Promise<void> {
    await this.monitor.checkSoon();
    await this.copyAll();
    this.monitor.start();
  }

  async insert(record: ApiKeyRecord): Promise<void> {
    await this.redis.insert(record);
    this.replica.put(record);
  }

  async findByHash(hash: string): Promise<ApiKeyRecord | null> {
    return (await this.redis.findByHash(hash)) ?? this.replica.findByHash(hash);
  }

  async get(id: string): Promise<ApiKeyRecord | null> {
    return (await this.redis.get(id)) ?? this.replica.get(id);
  }

  list(): Promise<ApiKeyRecord[]> {
    return this.redis.list();
  }

  count(): Promise<number> {
    return this.redis.count();
  }

  scanRecords(onBatch: (records: ApiKeyRecord[]) => void | Promise<void>): Promise<void> {
    return this.redis.scanRecords(onBatch);
  }

  /** The issued mark of the Redis store: the filter of issued hashes (issued/issued-keys.ts) follows it. */
  issuedMark(options?: { countHashes?: boolean }): Promise<StoreIssuedMark> {
    return this.redis.issuedMark(options);
  }

  /**
   * Every hash Redis holds and every hash of the copy: a filter rebuilt while Redis is empty after
   * a loss still knows every key, which the lookups above answer from the copy until the restore.
   */
  async scanIssuedHashes(onBatch: (hashes: string[]) => void): Promise<void> {
    await this.redis.scanIssuedHashes(onBatch);
    onBatch(this.replica.all().flatMap(hashesOf));
  }

  update(id: string, patch: KeyPatch, updatedAt: string): Promise<ApiKeyRecord | null> {
    return this.write(id, () => this.redis.update(id, patch, updatedAt));
  }

  revoke(id: string, revokedAt: string): Promise<ApiKeyRecord | null> {
    return this.write(id, () => this.redis.revoke(id, revokedAt));
  }

  rotate(id: string, rotation: KeyRotation, rotatedAt: string): Promise<ApiKeyRecord | null> {
    return this.write(id, () => this.redis.rotate(id, rotation, rotatedAt));
  }

  /**
   * The records as written (revocations kept) reach the copy before the answer, in transactions of
   * a few hundred with the event loop turning between them; an import undone writes nothing here.
   */
  async importRecords(records: ApiKeyRecord[]): Promise<RedisImportResult> {
    for (const { id } of records) this.importing.set(id, (this.importing.get(id) ?? 0) + 1);
    try {
      const result = await this.redis.importRecords(records);
      for (let at = 0; at < result.written.length; at += REPLICA_STEP) {
        this.replica.putAll(result.written.slice(at, at + REPLICA_STEP));
        await turnOfEventLoop();
      }
      return result;
    } finally {
      for (const { id } of records) {
        const left = this.importing.get(id)! - 1;
        if (left === 0) this.importing.delete(id);
        else this.importing.set(id, left);
      }
    }
  }

  closeConsumer(consumerId: string, token: string, holdMs: number): Promise<boolean> {
    return this.redis.closeConsumer(consumerId, token, holdMs);
  }

  reopenConsumer(consumerId: string, token: string): Promise<void> {
    return this.redis.reopenConsumer(consumerId, token);
  }

  onChange(listener: (change: KeyChange) => void): () => void {
    return this.redis.onChange(listener);
  }

  onResync(listener: () => void): () => void {
    return this.redis.onResync(listener);
  }

  /** Throws when the durable copy's file cannot take a write now (the gateway's /readyz). */
  checkWrites(): void {
    this.replica.checkWrites();
  }

  async close(): Promise<void> {
    this.closed = true;
    this.monitor.stop();
    for (const off of this.offs.splice(0)) off();
    await this.redis.close();
    this.replica.close();
  }

  /** A write to a record Redis lost puts the copy's record back first, so the write lands on it. */
  private async write(id: string, apply: () => Promise<ApiKeyRecord | null>): Promise<ApiKeyRecord | null> {
    let record = await apply();
    const known = record === null ? this.replica.get(id) : null;
    if (known) {
      await this.redis.restoreMissing([known]);
      record = await apply();
    }
    if (record) this.replica.put(record);
    return record;
  }

  /**
   * Reads changed records back into the copy, a batch of ids a round trip; a record Redis no
   * longer has is kept as it was (Redis may have lost it), unless its change said it is gone (an
   * import undone). A read that fails is tried again a second later, so no change is dropped.
   */
  private follow(change: KeyChange): void {
    if (this.importing.has(change.id)) return;
    this.pending.set(change.id, change.removed === true);
    if (this.following) return;
    this.following = true;
    setImmediate(() => void this.readBack());
  }

  private async readBack(): Promise<void> {
    while (this.pending.size > 0 && !this.closed) {
      const batch = [...this.pending].slice(0, RECORDS_PER_READ);
      for (const [id] of batch) this.pending.delete(id);
      try {
        const found = await this.redis.getMany(batch.map(([id]) => id));
        if (this.closed) break;
        this.replica.putAll([...found.values()]);
        for (const [id, removed] of batch) if (removed && !found.has(id)) this.replica.forget(id);
      } catch (err) {
        this.onCopyFailed(err);
        for (const [id, removed] of batch) if (!this.pending.has(id)) this.pending.set(id, removed);
        await sleep(1000);
      }
      await turnOfEventLoop();
    }
    this.following = false;
  }

  /** Every record Redis holds, a transaction per HSCAN step (never one read of every key). */
  private async copyAll(): Promise<void> {
    try {
      await this.redis.scanRecords((records) => this.replica.putAll(records));
    } catch (err) {
      this.onCopyFailed(err);
    }
  }
}
