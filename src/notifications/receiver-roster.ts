import { randomUUID } from 'node:crypto';
import type { Clock } from '../shared/clock';
import type { WebhookEventType } from '../shared/config';
import type { Logger } from '../shared/logger';
import type { Receiver } from './endpoints';
import type { Outbox } from './outbox';

/** How often an instance names its receivers again when nothing changed (and drops what nobody names). */
export const ROSTER_REFRESH_MS = 10_000;
/**
 * How long the outbox believes an instance's list without hearing it again: an instance that died
 * without a word keeps its receivers' deliveries this long. Six refreshes, so a slow store or a
 * busy event loop never makes a running instance look gone.
 */
export const ROSTER_LIVENESS_MS = 60_000;
/**
 * Deliveries dropped per call at most: a receiver removed with 100,000 events waiting never holds
 * Redis (or the SQLite file) for long; the next batch goes on the next check, half a second later.
 */
export const MAX_DROPS_PER_CALL = 1000;
/** How often the config in force is compared with the one last named: a reload is seen within this. */
const CONFIG_CHECK_MS = 500;
/** After a refused call, the next try; meanwhile nothing is dropped (the safe side). */
const RETRY_MS = 2000;
/** At most one line a minute about an outbox that does not answer. */
const ERROR_LOG_INTERVAL_MS = 60_000;

export interface ReceiverRosterOptions {
  outbox: Outbox;
  clock: Clock;
  logger: Logger;
  /** The receivers of the config in force; a new array after a reload. */
  receivers(): readonly Receiver[];
  /** Deliveries dropped because no instance names their receiver any more, one type per delivery. */
  onDropped(types: readonly WebhookEventType[]): void;
}

/**
 * Tells the outbox which receivers this instance delivers to: at start, within CONFIG_CHECK_MS of a
 * reload, and every ROSTER_REFRESH_MS. The outbox then drops the deliveries to receivers that no
 * running instance names, so a receiver removed from the config leaves no event waiting for ever
 * (and no alert firing for ever), while an instance that still names it (mid rolling deploy, not
 * reloaded yet) keeps its events. Receivers come from the config alone: one whose secret file
 * cannot be read is still named, and its events wait for a reload that mends it.
 */
export class ReceiverRoster {
  /** This process's name in the outbox: each instance and worker names its own receivers. */
  private readonly instance = randomUUID();
  private timer: NodeJS.Timeout | null = null;
  /** The receivers last named (or tried), by identity: a reload makes a new array. */
  private named: readonly Receiver[] | null = null;
  /** performance.now() of the next refresh when the config has not changed. */
  private nextAt = 0;
  private running: Promise<void> | null = null;
  private lastErrorAt = Number.NEGATIVE_INFINITY;

  constructor(private readonly options: ReceiverRosterOptions) {}

  start(): void {
    if (this.timer !== null) return;
    this.timer = setInterval(() => this.tick(), CONFIG_CHECK_MS).unref();
    this.tick();
  }

  private tick(): void {
    if (this.running !== null) return;
    const receivers = this.options.receivers();
    if (receivers === this.named && performance.now() < this.nextAt) return;
    this.running = this.name(receivers).finally(() => {
      this.running = null;
    });
  }

  private async name(receivers: readonly Receiver[]): Promise<void> {
    this.named = receivers;
    const now = this.options.clock.now();
    try {
      const dropped = await this.options.outbox.keepReceivers(
        this.instance,
        receivers.map((r) => r.key),
        now,
        now + ROSTER_LIVENESS_MS,
        MAX_DROPS_PER_CALL,
      );
      // A full batch: more may wait, so the next check asks again.
      this.nextAt = dropped.length >= MAX_DROPS_PER_CALL ? 0 : performance.now() + ROSTER_REFRESH_MS;
      if (dropped.length > 0) this.options.onDropped(dropped);
    } catch (err) {
      this.nextAt = performance.now() + RETRY_MS;
      this.reportError(err);
    }
  }

  private reportError(err: unknown): void {
    const now = performance.now();
    if (now - this.lastErrorAt < ERROR_LOG_INTERVAL_MS) return;
    this.lastErrorAt = now;
    this.options.logger.warn(
      { err: (err as Error).message },
      'webhook outbox does not answer; the receivers in force are named again later',
    );
  }

  /** Stops naming; the outbox forgets this instance at once, so its receivers are not kept for it. */
  async close(): Promise<void> {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
    await this.running;
    try {
      await this.options.outbox.forgetInstance(this.instance);
    } catch {
      // Forgotten anyway ROSTER_LIVENESS_MS after the last refresh.
    }
  }
}
