import type { KeyReplica } from './key-replica';
import type { KeyLossMonitor } from './key-loss-monitor';
import type { RedisKeyStore } from '../stores/redis-key-store';
import { hashesOf } from '../record';
import type { ApiKeyRecord, ImportResult, KeyChange, KeyPatch, KeyRotation, KeyStore, StoreIssuedMark } from '../types';

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
  /** Ids whose change arrived and whose record is being read back into the copy. */
  private readonly pending = new Set<string>();

  constructor(
    private readonly redis: RedisKeyStore,
    private readonly replica: KeyReplica,
    private readonly monitor: KeyLossMonitor,
    private readonly onCopyFailed: (err: unknown) => void,
  ) {
    this.offs = [
      redis.onChange((change) => this.follow(change.id)),
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

  async importRecords(records: ApiKeyRecord[]): Promise<ImportResult> {
    const result = await this.redis.importRecords(records);
    this.replica.putAll(records);
    return result;
  }

  onChange(listener: (change: KeyChange) => void): () => void {
    return this.redis.onChange(listener);
  }

  onResync(listener: () => void): () => void {
    return this.redis.onResync(listener);
  }

  async close(): Promise<void> {
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

  /** Reads a changed record back into the copy; a record Redis no longer has is kept as it was. */
  private follow(id: string): void {
    if (this.pending.has(id)) return;
    this.pending.add(id);
    setImmediate(() => {
      this.pending.delete(id);
      this.redis.get(id).then((record) => record && this.replica.put(record), this.onCopyFailed);
    });
  }

  private async copyAll(): Promise<void> {
    try {
      this.replica.putAll(await this.redis.list());
    } catch (err) {
      this.onCopyFailed(err);
    }
  }
}
