import type { Clock } from '../shared/clock';
import type { Logger } from '../shared/logger';
import { keyExpiringEvent, type WebhookEvent } from './events';

/** `key.expiring` is sent this long before a key's expiresAt (CONTRACT §5). */
export const EXPIRY_NOTICE_MS = 7 * 86_400_000;
/** How often the keys with an expiry are checked against the clock. */
const CHECK_INTERVAL_MS = 10_000;
/** How often the whole key list is read again (changes arrive in between through the store). */
const RESCAN_INTERVAL_MS = 3_600_000;

/** What the watch reads of the key store. */
export interface ExpiringKeySource {
  list(): Promise<
    Array<{ id: string; expiresAt: string | null; revokedAt: string | null; consumerId?: string | null }>
  >;
  get(
    id: string,
  ): Promise<{ id: string; expiresAt: string | null; revokedAt: string | null; consumerId?: string | null } | null>;
  onChange(listener: (change: { id: string }) => void): () => void;
}

export interface ExpiringKeysOptions {
  keys: ExpiringKeySource;
  clock: Clock;
  logger: Logger;
  /** Whether any receiver takes `key.expiring` now. */
  wanted(): boolean;
  emit(event: WebhookEvent): void;
}

/**
 * `key.expiring`, 7 days before a key's expiry. Each instance keeps the live keys that have an
 * expiry in memory (read whole at start and hourly, and kept current by the store's change
 * notices), and every 10 s emits those whose notice is due. Every instance emits the same event
 * id, and the outbox keeps it once.
 */
export class ExpiringKeysWatch {
  /** key id → {expiresAt, consumerId} of the live keys whose notice has not been emitted by this instance. */
  private readonly pending = new Map<string, { expiresAt: number; consumerId: string | null }>();
  private readonly timers: NodeJS.Timeout[] = [];
  private unsubscribe: () => void = () => {};
  private lastScanAt = Number.NEGATIVE_INFINITY;
  private scanning: Promise<void> | null = null;
  /** Keys whose change notice came while a whole read was under way: that read may hold them as they were. */
  private changedDuringScan: Set<string> | null = null;

  constructor(private readonly options: ExpiringKeysOptions) {}

  start(): void {
    this.unsubscribe = this.options.keys.onChange(({ id }) => void this.refresh(id));
    this.timers.push(setInterval(() => void this.check(), CHECK_INTERVAL_MS).unref());
    void this.check();
  }

  /** Emits the notices that are due; reads the whole list first when it is an hour old. */
  async check(): Promise<void> {
    if (!this.options.wanted()) return;
    const now = this.options.clock.now();
    if (now - this.lastScanAt >= RESCAN_INTERVAL_MS || this.lastScanAt > now) await this.scan(now);
    for (const [id, key] of this.pending) {
      if (now < key.expiresAt - EXPIRY_NOTICE_MS) continue;
      this.pending.delete(id);
      if (now < key.expiresAt) this.options.emit(keyExpiringEvent(id, key.consumerId, key.expiresAt, now));
    }
  }

  private scan(now: number): Promise<void> {
    this.scanning ??= (async () => {
      const changed = new Set<string>();
      this.changedDuringScan = changed;
      try {
        const records = await this.options.keys.list();
        this.pending.clear();
        // A key changed meanwhile is left to its own read (refresh), which follows this one.
        for (const record of records) if (!changed.has(record.id)) this.remember(record);
        this.lastScanAt = now;
      } catch (err) {
        this.options.logger.warn(
          { err: (err as Error).message },
          'could not read the keys for key.expiring; trying again',
        );
      } finally {
        this.changedDuringScan = null;
        this.scanning = null;
      }
    })();
    return this.scanning;
  }

  private remember(record: {
    id: string;
    expiresAt: string | null;
    revokedAt: string | null;
    consumerId?: string | null;
  }): void {
    this.pending.delete(record.id);
    if (record.revokedAt !== null || record.expiresAt === null) return;
    this.pending.set(record.id, { expiresAt: Date.parse(record.expiresAt), consumerId: record.consumerId ?? null });
  }

  /** A key changed (created, its expiry moved, revoked) on this instance or another. */
  private async refresh(id: string): Promise<void> {
    try {
      // A whole read under way may hold the key as it was before this change: read it after that.
      this.changedDuringScan?.add(id);
      if (this.scanning) await this.scanning;
      const record = await this.options.keys.get(id);
      if (record) this.remember(record);
      else this.pending.delete(id);
      await this.check();
    } catch (err) {
      this.options.logger.warn(
        { err: (err as Error).message, keyId: id },
        'could not read a changed key for key.expiring',
      );
    }
  }

  close(): void {
    for (const timer of this.timers) clearInterval(timer);
    this.unsubscribe();
  }
}
