import type { Registry } from 'prom-client';
import type { Clock } from '../shared/clock';
import type { NotificationsConfig, WebhookEventType } from '../shared/config';
import type { Logger } from '../shared/logger';
import { createDecisionWatch, type DecisionWatch } from './decision-watch';
import { WebhookDispatcher } from './dispatcher';
import { endpointsOf, type Endpoint } from './endpoints';
import type { WebhookEvent } from './events';
import { ExpiringKeysWatch, type ExpiringKeySource } from './expiring-keys';
import { createNotificationMetrics, type NotificationMetrics } from './notification-metrics';
import type { Outbox } from './outbox';
import { OutboxWriter } from './outbox-writer';
import { WebhookSender } from './sender';

export interface NotifierOptions {
  outbox: Outbox;
  config: NotificationsConfig;
  /** Config `ban.durationSeconds` in ms. */
  banDurationMs: number;
  keys: ExpiringKeySource;
  clock: Clock;
  logger: Logger;
  registry: Registry;
  random?: () => number;
  pollIntervalMs?: number;
}

/**
 * The webhooks of CONTRACT §5 in one place: the watches that find events (the limiter's decisions
 * on the request path, keys nearing their expiry), the writer that puts them in the outbox off the
 * path, and the dispatcher that delivers them. `watchDecision` is what the gateway calls; a reload
 * hands over the new receivers with `applyConfig`.
 */
export class Notifier {
  readonly watchDecision: DecisionWatch;
  readonly metrics: NotificationMetrics;
  private config: NotificationsConfig;
  private endpoints: readonly Endpoint[] = [];
  private readonly writer: OutboxWriter;
  private readonly dispatcher: WebhookDispatcher;
  private readonly sender: WebhookSender;
  private readonly expiring: ExpiringKeysWatch;

  constructor(private readonly options: NotifierOptions) {
    const { outbox, clock, logger } = options;
    this.config = options.config;
    this.metrics = createNotificationMetrics(options.registry, () => outbox.size());
    this.sender = new WebhookSender(() => this.config.timeoutMs);
    this.dispatcher = new WebhookDispatcher({
      outbox,
      sender: this.sender,
      clock,
      logger,
      metrics: this.metrics,
      timeoutMs: () => this.config.timeoutMs,
      random: options.random,
      pollIntervalMs: options.pollIntervalMs,
    });
    this.writer = new OutboxWriter({
      outbox,
      clock,
      maxEvents: () => this.config.outboxMaxEvents,
      onDropped: (types) => this.countDropped(types),
      onWritten: () => this.dispatcher.wake(),
      onError: (err) => logger.warn({ err: (err as Error).message }, 'could not write webhook events to the outbox; keeping them to write again'),
    });
    const emit = (event: WebhookEvent) => this.emit(event);
    this.watchDecision = createDecisionWatch({ banDurationMs: options.banDurationMs, wanted: (type) => this.wanted(type), emit });
    this.expiring = new ExpiringKeysWatch({ keys: options.keys, clock, logger, wanted: () => this.wanted('key.expiring'), emit });
    this.applyConfig(options.config);
    this.expiring.start();
  }

  /** A reload's `notifications`: receivers, secrets and events in force for what is detected and delivered from now on. */
  applyConfig(config: NotificationsConfig): void {
    this.config = config;
    this.endpoints = endpointsOf(config, (url, err) =>
      this.options.logger.error({ url, err: (err as Error).message }, 'webhook secret file cannot be read: this receiver gets nothing until it can'),
    );
    this.dispatcher.setEndpoints(this.endpoints);
  }

  private wanted(type: WebhookEventType): boolean {
    for (const endpoint of this.endpoints) if (endpoint.events.has(type)) return true;
    return false;
  }

  /** An event goes to the receivers that take its type, as they are now. */
  private emit(event: WebhookEvent): void {
    const endpoints: string[] = [];
    for (const endpoint of this.endpoints) if (endpoint.events.has(event.type)) endpoints.push(endpoint.key);
    if (endpoints.length > 0) this.writer.push({ ...event, endpoints });
  }

  private countDropped(types: readonly WebhookEventType[]): void {
    for (const event of types) this.metrics.deliveries.inc({ event, result: 'dropped' });
    this.options.logger.error({ events: types.length }, 'webhook outbox full: oldest events dropped (notifications.outboxMaxEvents)');
  }

  /** Stops finding and delivering; what was found is written to the outbox first. */
  async close(): Promise<void> {
    this.expiring.close();
    await this.writer.close();
    await this.dispatcher.close();
    await this.sender.close();
  }
}
