import type { Clock } from '../shared/clock';
import type { WebhookEventType } from '../shared/config';
import type { Outbox, OutboxEvent } from './outbox';

/** How soon a batch the outbox refused is sent again. */
const RETRY_AFTER_MS = 1000;

export interface OutboxWriterOptions {
  outbox: Outbox;
  clock: Clock;
  /** Config `notifications.outboxMaxEvents`, read at each flush (it may be reloaded). */
  maxEvents(): number;
  /** Events dropped past the bound, here or in the outbox. */
  onDropped(types: readonly WebhookEventType[]): void;
  /** A batch is in the outbox: the dispatcher may look at once. */
  onWritten(): void;
  onError(err: unknown): void;
}

/**
 * Takes events from the request path without waiting on anything: `push` only appends to memory.
 * What gathered is written in one batch on the next turn of the event loop (events are rare, so a
 * batch is usually one event, written within a store round trip of the request that saw it). A
 * batch the outbox refused stays here, bounded like the outbox, and is written again; the outbox
 * keeps an event once however often it is written.
 */
export class OutboxWriter {
  private pending: OutboxEvent[] = [];
  /** The next flush, when one is planned: on the next turn, or after a refused batch. */
  private scheduled: { immediate: NodeJS.Immediate } | { timeout: NodeJS.Timeout } | null = null;
  private flushing: Promise<void> = Promise.resolve();

  constructor(private readonly options: OutboxWriterOptions) {}

  push(event: OutboxEvent): void {
    this.pending.push(event);
    const excess = this.pending.length - this.options.maxEvents();
    if (excess > 0) this.options.onDropped(this.pending.splice(0, excess).map((e) => e.type));
    if (this.scheduled === null) this.scheduled = { immediate: setImmediate(() => void this.flush()) };
  }

  /** Writes what is pending; flushes run one after another. */
  flush(): Promise<void> {
    this.flushing = this.flushing.then(() => this.flushOnce());
    return this.flushing;
  }

  private async flushOnce(): Promise<void> {
    this.clearSchedule();
    if (this.pending.length === 0) return;
    const batch = this.pending;
    this.pending = [];
    try {
      const dropped = await this.options.outbox.add(batch, this.options.clock.now(), this.options.maxEvents());
      if (dropped.length > 0) this.options.onDropped(dropped);
      this.options.onWritten();
    } catch (err) {
      this.options.onError(err);
      this.pending = batch.concat(this.pending);
      const excess = this.pending.length - this.options.maxEvents();
      if (excess > 0) this.options.onDropped(this.pending.splice(0, excess).map((e) => e.type));
      if (this.scheduled === null)
        this.scheduled = { timeout: setTimeout(() => void this.flush(), RETRY_AFTER_MS).unref() };
    }
  }

  private clearSchedule(): void {
    if (this.scheduled === null) return;
    if ('immediate' in this.scheduled) clearImmediate(this.scheduled.immediate);
    else clearTimeout(this.scheduled.timeout);
    this.scheduled = null;
  }

  /** At shutdown: one last write of what is pending. */
  async close(): Promise<void> {
    await this.flush();
    this.clearSchedule();
  }
}
