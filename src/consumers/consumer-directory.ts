import type { ConsumerRecord, ConsumerStore } from './types';

/** How often the whole directory is read again, for a change whose message was lost. */
const DEFAULT_REFRESH_MS = 30_000;

/**
 * Every consumer, held in this process so the request path learns a key's consumer without a
 * store command. Follows the store's change messages (a change reaches every instance within a
 * second: one PUBLISH, one HGET), reads everything again after a resync (a reconnect, or a lost
 * Cluster node: shared/redis/change-feed.ts) and every 30 s, for a message lost some other way.
 */
export class ConsumerDirectory {
  private byId = new Map<string, ConsumerRecord>();
  private readonly offs: Array<() => void> = [];
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly store: ConsumerStore,
    private readonly onError: (err: unknown) => void = () => {},
    private readonly refreshMs = DEFAULT_REFRESH_MS,
  ) {}

  async start(): Promise<void> {
    this.offs.push(this.store.onChange((id) => void this.follow(id)));
    if (this.store.onResync) this.offs.push(this.store.onResync(() => void this.refresh()));
    await this.reloadAll();
    this.timer = setInterval(() => void this.refresh(), this.refreshMs);
    this.timer.unref();
  }

  get(id: string): ConsumerRecord | undefined {
    return this.byId.get(id);
  }

  all(): ConsumerRecord[] {
    return [...this.byId.values()];
  }

  private async reloadAll(): Promise<void> {
    const next = new Map<string, ConsumerRecord>();
    for (const record of await this.store.list()) next.set(record.id, record);
    this.byId = next;
  }

  private async refresh(): Promise<void> {
    try {
      await this.reloadAll();
    } catch (err) {
      this.onError(err);
    }
  }

  private async follow(id: string): Promise<void> {
    try {
      const record = await this.store.get(id);
      if (record) this.byId.set(id, record);
      else this.byId.delete(id);
    } catch (err) {
      this.onError(err);
    }
  }

  close(): void {
    clearInterval(this.timer);
    for (const off of this.offs.splice(0)) off();
  }
}
