import { randomBytes } from 'node:crypto';
import type { KeyReplica } from './key-replica';
import type { RedisKeyStore } from '../stores/redis-key-store';

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

export interface KeyLossMonitorOptions {
  /** How often Redis is checked (besides every reconnect); the contract gives 30 s, default 5 s. */
  intervalMs: number;
  /** Told once per restore that wrote records back, by the one instance that wrote them. */
  onDataLoss(event: DataLossEvent): void;
  /** A check that could not run (Redis unreachable): retried on the next tick. */
  onCheckFailed(err: unknown): void;
}

/** Long enough for a restore of many records, short enough that a crashed restorer is replaced soon. */
const RESTORE_LOCK_MS = 30_000;

/**
 * Tells an empty Redis from a new one and puts lost key records back. Redis carries an epoch
 * marker from the first check on; it vanishes with the data. Marker missing while this instance's
 * durable copy holds records, fewer records in Redis than in the copy, or Redis's writes counter
 * below one this instance saw before (a rollback that new keys may have made up in number):
 * records may have been lost. The
 * instance that takes the restore lock (SET NX PX) writes back every record Redis lacks, leaving
 * records Redis has (written since, so newer) as they are, then sets the marker again; the others
 * find the marker back on their next check. One round trip per check when nothing is wrong.
 */
export class KeyLossMonitor {
  private readonly owner = randomBytes(8).toString('hex');
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | null = null;
  /** The highest `writes` counter this instance has read from Redis. */
  private highestWrites = 0;

  constructor(
    private readonly redis: RedisKeyStore,
    private readonly replica: KeyReplica,
    private readonly options: KeyLossMonitorOptions,
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
    // missed writes), even if keys created since make up the number of records.
    const wentBack = health.writes < this.highestWrites;
    this.highestWrites = wentBack ? health.writes : Math.max(this.highestWrites, health.writes);
    if (health.markerPresent && health.records >= this.replica.size && !wentBack) return;
    if (this.replica.size === 0) {
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
      const missing = this.replica.all().filter((record) => !present.has(record.id));
      const restoredIds = await this.redis.restoreMissing(missing);
      await this.redis.setMarker(this.epoch());
      if (restoredIds.length > 0)
        this.options.onDataLoss({ reason, known: this.replica.size, foundInRedis, restoredIds });
    } finally {
      await this.redis.unlockRestore(this.owner).catch(() => {});
    }
  }

  private epoch(): string {
    return `${new Date().toISOString()} ${this.owner}`;
  }
}
