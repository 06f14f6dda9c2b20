import { randomBytes } from 'node:crypto';
import { defineLuaScript } from './lua-script';

/** What a restore after data loss found and did: ids only, never a key or a hash. */
export interface DataLossEvent {
  /** `marker_missing`: Redis came back empty (restart without persistence, FLUSHALL); `records_missing`: some records are gone (a failover to a replica that missed writes). */
  reason: 'marker_missing' | 'records_missing';
  /** Records this instance knows. */
  known: number;
  /** Records Redis held when the loss was noticed. */
  foundInRedis: number;
  /** Ids written back into Redis by this instance. */
  restoredIds: string[];
}

/** What the loss check reads in one round trip. */
export interface RecordsHealth {
  markerPresent: boolean;
  records: number;
  /** The `writes` counter (0 when absent): Redis only grows it. */
  writes: number;
}

/** The Redis side of records kept with a durable copy (the key store, the consumer store). */
export interface LossCheckedRecords<R> {
  /** Marker, number of records and writes counter, in one round trip. */
  health(): Promise<RecordsHealth>;
  /** Sets the epoch marker unless present. */
  setMarker(epoch: string): Promise<boolean>;
  lockRestore(owner: string, ttlMs: number): Promise<boolean>;
  unlockRestore(owner: string): Promise<void>;
  /** Every id Redis holds. */
  ids(): Promise<string[]>;
  /** Writes back the records Redis lacks, leaving those it holds as they are; the ids written. */
  restoreMissing(records: R[]): Promise<string[]>;
  /**
   * Of these ids, those deleted on purpose (records that can be deleted: consumers), which a copy
   * that still holds them forgets rather than puts back. Absent: records are never deleted (keys).
   */
  deletedOf?(ids: string[]): Promise<string[]>;
}

/** The durable copy beside them (shared/redis/record-copy.ts). */
export interface LossCheckedCopy<R> {
  readonly size: number;
  all(): R[];
  forget(id: string): unknown;
}

export interface LossCheckOptions {
  /** How often Redis is checked (besides every reconnect); the contract gives 30 s, default 5 s. */
  intervalMs: number;
  /** Told once per restore that wrote records back, by the one instance that wrote them. */
  onDataLoss(event: DataLossEvent): void;
  /** A check that could not run (Redis unreachable): retried on the next tick. */
  onCheckFailed(err: unknown): void;
}

/**
 * {marker present (1/0), number of records, writes counter}: the loss check, one round trip.
 * KEYS 1 the marker, 2 the hash of records by id, 3 the writes counter.
 */
const HEALTH_SCRIPT = `
return {redis.call('EXISTS', KEYS[1]), redis.call('HLEN', KEYS[2]), tonumber(redis.call('GET', KEYS[3]) or '0')}`;

/** Releases the restore lock only if it is still ours (it may have expired and been taken). KEYS 1 the lock, ARGV 1 its owner. */
const UNLOCK_SCRIPT = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`;

/** The two scripts of every store the loss check watches (keys, consumers): one name each, one source. */
export const LOSS_CHECK_HEALTH = defineLuaScript<[number, number, number]>('asgLossCheckHealth', HEALTH_SCRIPT, 3);
export const RESTORE_UNLOCK = defineLuaScript<number>('asgLossCheckUnlock', UNLOCK_SCRIPT, 1);

/** Long enough for a restore of many records, short enough that a crashed restorer is replaced soon. */
const RESTORE_LOCK_MS = 30_000;

/**
 * Tells an empty Redis from a new one and puts lost records back, for keys and consumers alike.
 * Redis carries an epoch marker from the first check on; it vanishes with the data. Marker missing
 * while this instance's durable copy holds records, fewer records in Redis than in the copy, or
 * Redis's writes counter below one this instance saw before (a rollback that new records may have
 * made up in number): records may have been lost. The instance that takes the restore lock (SET NX
 * PX) writes back every record Redis lacks, leaving records Redis has (written since, so newer) as
 * they are, then sets the marker again; a record Redis says was deleted is forgotten by the copy
 * instead. The others find the marker back on their next check. One round trip per check when
 * nothing is wrong.
 */
export class LossCheck<R extends { id: string }> {
  private readonly owner = randomBytes(8).toString('hex');
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | null = null;
  /** The highest `writes` counter this instance has read from Redis. */
  private highestWrites = 0;

  constructor(
    private readonly redis: LossCheckedRecords<R>,
    private readonly copy: LossCheckedCopy<R>,
    private readonly options: LossCheckOptions,
  ) {}

  start(): void {
    this.timer = setInterval(() => void this.checkSoon(), this.options.intervalMs);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  /** One check at a time; a call during a check waits for that one. Never rejects. */
  checkSoon(): Promise<void> {
    this.running ??= this.check()
      .catch((err: unknown) => this.options.onCheckFailed(err))
      .finally(() => (this.running = null));
    return this.running;
  }

  private async check(): Promise<void> {
    const health = await this.redis.health();
    // A writes counter below one seen before: Redis went back in time (a failover to a replica that
    // missed writes), even if records written since make up the number of records.
    const wentBack = health.writes < this.highestWrites;
    this.highestWrites = wentBack ? health.writes : Math.max(this.highestWrites, health.writes);
    if (health.markerPresent && health.records >= this.copy.size && !wentBack) return;
    if (this.copy.size === 0) {
      // A new Redis (or one written before the marker existed): nothing of ours to miss.
      await this.redis.setMarker(this.epoch());
      return;
    }
    await this.restore(health.markerPresent ? 'records_missing' : 'marker_missing', health.records);
  }

  private async restore(reason: DataLossEvent['reason'], foundInRedis: number): Promise<void> {
    if (!(await this.redis.lockRestore(this.owner, RESTORE_LOCK_MS))) return;
    try {
      const present = new Set(await this.redis.ids());
      let missing = this.copy.all().filter((record) => !present.has(record.id));
      if (this.redis.deletedOf && missing.length > 0) {
        const deleted = new Set(await this.redis.deletedOf(missing.map((record) => record.id)));
        for (const id of deleted) this.copy.forget(id);
        missing = missing.filter((record) => !deleted.has(record.id));
      }
      const restoredIds = await this.redis.restoreMissing(missing);
      await this.redis.setMarker(this.epoch());
      if (restoredIds.length > 0) this.options.onDataLoss({ reason, known: this.copy.size, foundInRedis, restoredIds });
    } finally {
      await this.redis.unlockRestore(this.owner).catch(() => {});
    }
  }

  private epoch(): string {
    return `${new Date().toISOString()} ${this.owner}`;
  }
}
