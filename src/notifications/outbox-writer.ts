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
 * batch the outbox refused stays here, bounded like the outbox, and is written again a second
 * later with what was pushed meanwhile (never back to back against an outbox that refuses); the
 * outbox keeps an event once however often it is written.
 */
export class OutboxWriter {
  private pending: OutboxEvent[] = [];
  /** The write planned on the next turn, after a push. */
  private immediate: NodeJS.Immediate | null = null;
  /** The write planned a second after a refused batch: until then, nothing is written but by close. */
  private retry: NodeJS.Timeout | null = null;
  private flushing: Promise<void> = Promise.resolve();

  constructor(private readonly options: OutboxWriterOptions) {}

  push(event: OutboxEvent): void {
    this.pending.push(event);
    const excess = this.pending.length - this.options.maxEvents();
    if (excess > 0) this.options.onDropped(this.pending.splice(0, excess).map((e) => e.type));
    if (this.immediate === null && this.retry === null)
      this.immediate = setImmediate(() => {
        this.immediate = null;
        void this.write(false);
      });
  }

  /** Writes what is pending now (a retry planned is brought forward); writes run one after another. */
  flush(): Promise<void> {
    return this.write(true);
  }

  /**
   * Queues a write behind the one under way. A turn's write that finds a retry planned (the write
   * before it was refused meanwhile) is left to the retry: never back to back against an outbox
   * that refuses.
   */
  private write(evenWhileRefused: boolean): Promise<void> {
    this.flushing = this.flushing.then(() => (evenWhileRefused || this.retry === null ? this.flushOnce() : undefined));
    return this.flushing;
  }

  private async flushOnce(): Promise<void> {
    if (this.retry !== null) clearTimeout(this.retry);
    this.retry = null;
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
      this.retry = setTimeout(() => {
        this.retry = null;
        void this.flush();
      }, RETRY_AFTER_MS).unref();
    }
  }

  /** At shutdown: one last write of what is pending. */
  async close(): Promise<void> {
    await this.flush();
    if (this.immediate !== null) clearImmediate(this.immediate);
    if (this.retry !== null) clearTimeout(this.retry);
    this.immediate = null;
    this.retry = null;
  }
}
