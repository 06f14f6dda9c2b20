import type { Registry } from 'prom-client';
import type { Clock } from '../../shared/clock';
import type { Logger } from '../../shared/logger';
import { readUsageSinkToken, type UsageEventsConfig } from '../../shared/config';
import type { AdminListenerAddress } from '../../shared/http/admin-listener-address';
import type { Outbox } from '../../notifications/outbox';
import { WebhookSender } from '../../notifications/sender';
import { PeriodCloser } from './period-closer';
import type { UsagePeriodLedger } from './period-ledger';
import type { SentStateStore } from './sent-state';
import { UsageDispatcher } from './usage-dispatcher';
import { createUsageEventMetrics, type UsageEventMetrics } from './usage-metrics';

/** How often periods are looked at and the outbox asked for what is due (a period closes within this of its grace). */
export const USAGE_TICK_MS = 1000;

export interface UsageEventsOptions {
  ledger: UsagePeriodLedger;
  /** Opened on first use (a gateway with usage events off opens no file). */
  open(): { outbox: Outbox; state: SentStateStore };
  keys: { get(id: string): Promise<{ plan: string; consumerId?: string | null } | null> };
  config(): UsageEventsConfig;
  clock: Clock;
  logger: Logger;
  registry: Registry;
  adminListener?: () => AdminListenerAddress;
}

/**
 * Usage events (CONTRACT §5): every tick the closer turns closed periods into events in the
 * outbox, and the dispatcher sends what is due to the sink. Both read the config in force at each
 * tick, so a reload turns them on, off, or to another sink; nothing is read on the request path.
 */
export class UsageEvents {
  readonly metrics: UsageEventMetrics;
  private parts: { outbox: Outbox; state: SentStateStore; closer: PeriodCloser; dispatcher: UsageDispatcher } | null =
    null;
  private readonly sender: WebhookSender;
  private timer: NodeJS.Timeout | null = null;
  private ticking: Promise<void> | null = null;
  private headers: { madeFor: UsageEventsConfig; headers: Record<string, string> } | null = null;
  private lastErrorAt = Number.NEGATIVE_INFINITY;

  constructor(private readonly options: UsageEventsOptions) {
    this.sender = new WebhookSender(() => options.config().timeoutMs, options.adminListener);
    this.metrics = createUsageEventMetrics(options.registry, async () => (this.parts ? this.parts.outbox.size() : 0));
  }

  start(): void {
    this.timer ??= setInterval(() => void this.tick(), USAGE_TICK_MS).unref();
  }

  /** One closing pass and one sending pass (tests call it too). */
  tick(): Promise<void> {
    this.ticking ??= this.tickOnce().finally(() => {
      this.ticking = null;
    });
    return this.ticking;
  }

  private async tickOnce(): Promise<void> {
    const config = this.options.config();
    if (!config.enabled || config.url === null) return;
    try {
      const parts = this.partsOpen();
      // Sending runs beside closing: a sink that hangs never holds the closing of periods.
      void parts.dispatcher.wake();
      await parts.closer.tick();
    } catch (err) {
      const now = performance.now();
      if (now - this.lastErrorAt < 60_000) return;
      this.lastErrorAt = now;
      this.options.logger.warn(
        { err: (err as Error).message },
        'usage events: periods could not be closed now; tried again next tick',
      );
    }
  }

  private partsOpen() {
    if (this.parts) return this.parts;
    const { outbox, state } = this.options.open();
    const { clock, logger } = this.options;
    const dispatcher = new UsageDispatcher({
      outbox,
      sender: this.sender,
      clock,
      logger,
      metrics: this.metrics,
      config: this.options.config,
      headers: () => this.sinkHeaders(),
      periodMs: () => PeriodCloser.periodMsOf(this.options.config()),
    });
    const closer = new PeriodCloser({
      ledger: this.options.ledger,
      state,
      outbox,
      keys: this.options.keys,
      config: this.options.config,
      clock,
      logger,
      onWritten: () => void dispatcher.wake(),
      onDropped: (count) => this.metrics.events.inc({ result: 'dropped' }, count),
    });
    this.parts = { outbox, state, closer, dispatcher };
    return this.parts;
  }

  /** The configured headers and the token of `tokenFile`, read once per config in force. */
  private sinkHeaders(): Record<string, string> {
    const config = this.options.config();
    if (this.headers?.madeFor !== config) {
      const token = readUsageSinkToken(config);
      this.headers = {
        madeFor: config,
        headers: { ...config.headers, ...(token ? { authorization: `Bearer ${token}` } : {}) },
      };
    }
    return this.headers.headers;
  }

  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.ticking;
    if (this.parts) {
      await this.parts.dispatcher.close();
      await this.parts.closer.close();
      this.parts.outbox.close();
      this.parts.state.close();
    }
    await this.sender.close();
  }
}
