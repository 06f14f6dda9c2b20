import type { Registry } from 'prom-client';
import type { AdminListenerAddress } from '../shared/http/admin-listener-address';
import type { Clock } from '../shared/clock';
import type { NotificationsConfig, WebhookEventType } from '../shared/config';
import type { Logger } from '../shared/logger';
import { createDecisionWatch, type DecisionWatch } from './decision-watch';
import { WebhookDispatcher } from './dispatcher';
import { endpointsOf, receiversOf, type Endpoint, type Receiver } from './endpoints';
import { keyRevokedEvent, type RevokedBy, type WebhookEvent } from './events';
import { ExpiringKeysWatch, type ExpiringKeySource } from './expiring-keys';
import { createNotificationMetrics, type NotificationMetrics } from './notification-metrics';
import type { Outbox } from './outbox';
import { OutboxWriter } from './outbox-writer';
import { ReceiverRoster } from './receiver-roster';
import { WebhookSender } from './sender';

export interface NotifierOptions {
  outbox: Outbox;
  /** Config `notifications` in force (a reload may change it): asked whenever it is needed. */
  config(): NotificationsConfig;
  /** Config `ban.durationSeconds` in ms. */
  banDurationMs: number;
  keys: ExpiringKeySource;
  clock: Clock;
  logger: Logger;
  registry: Registry;
  random?: () => number;
  pollIntervalMs?: number;
  /** Where this gateway's admin listener answers: no delivery may reach it (sender.ts). */
  adminListener?: () => AdminListenerAddress;
}

/**
 * The webhooks of CONTRACT §5 in one place: the watches that find events (the limiter's decisions
 * on the request path, keys nearing their expiry), the writer that puts them in the outbox off the
 * path, and the dispatcher that delivers them. `watchDecision` is what the gateway calls. The
 * receivers are those of the config in force, asked at each use as every reader of a reloadable
 * setting asks it: a reload tells the notifier nothing.
 */
export class Notifier {
  readonly watchDecision: DecisionWatch;
  readonly metrics: NotificationMetrics;
  private readonly writer: OutboxWriter;
  private readonly dispatcher: WebhookDispatcher;
  private readonly sender: WebhookSender;
  private readonly expiring: ExpiringKeysWatch;
  private readonly roster: ReceiverRoster;
  /** What the request path reads of the receivers (URL digests and events: no I/O), for one config. */
  private receivers: { madeFor: NotificationsConfig; receivers: readonly Receiver[] } | null = null;
  /** What the dispatcher signs with (secrets, read from their files), for one config: made off the request path. */
  private endpoints: { madeFor: NotificationsConfig; endpoints: readonly Endpoint[] } | null = null;

  constructor(private readonly options: NotifierOptions) {
    const { outbox, clock, logger } = options;
    const timeoutMs = () => options.config().timeoutMs;
    this.metrics = createNotificationMetrics(options.registry, () => outbox.size());
    this.sender = new WebhookSender(timeoutMs, options.adminListener);
    this.dispatcher = new WebhookDispatcher({
      outbox,
      sender: this.sender,
      clock,
      logger,
      metrics: this.metrics,
      endpoints: () => this.endpointsInForce(),
      timeoutMs,
      random: options.random,
      pollIntervalMs: options.pollIntervalMs,
    });
    this.writer = new OutboxWriter({
      outbox,
      clock,
      maxEvents: () => options.config().outboxMaxEvents,
      onDropped: (types) => this.countDropped(types),
      onWritten: () => this.dispatcher.wake(),
      onError: (err) =>
        logger.warn(
          { err: (err as Error).message },
          'could not write webhook events to the outbox; keeping them to write again',
        ),
    });
    const emit = (event: WebhookEvent) => this.emit(event);
    this.watchDecision = createDecisionWatch({
      banDurationMs: options.banDurationMs,
      wanted: (type) => this.wanted(type),
      emit,
    });
    this.expiring = new ExpiringKeysWatch({
      keys: options.keys,
      clock,
      logger,
      wanted: () => this.wanted('key.expiring'),
      emit,
    });
    this.roster = new ReceiverRoster({
      outbox,
      clock,
      logger,
      receivers: () => this.receiversInForce(),
      onDropped: (types) => this.countRemoved(types),
    });
    this.roster.start();
    this.dispatcher.start();
    this.expiring.start();
  }

  /** The receivers of the config in force: one identity check per use, made again only after a reload. */
  private receiversInForce(): readonly Receiver[] {
    const config = this.options.config();
    if (this.receivers?.madeFor !== config) this.receivers = { madeFor: config, receivers: receiversOf(config) };
    return this.receivers.receivers;
  }

  /** The receivers the dispatcher delivers to, with their secrets: asked by its polls, never by a request. */
  private endpointsInForce(): readonly Endpoint[] {
    const config = this.options.config();
    if (this.endpoints?.madeFor !== config) {
      const endpoints = endpointsOf(config, (url, err) =>
        this.options.logger.error(
          { url, err: (err as Error).message },
          'webhook secret file cannot be read: its events wait in the outbox until a reload with a readable one',
        ),
      );
      this.endpoints = { madeFor: config, endpoints };
    }
    return this.endpoints.endpoints;
  }

  private wanted(type: WebhookEventType): boolean {
    for (const receiver of this.receiversInForce()) if (receiver.events.has(type)) return true;
    return false;
  }

  /** An event goes to the receivers that take its type, as they are now. */
  private emit(event: WebhookEvent): void {
    const endpoints: string[] = [];
    for (const receiver of this.receiversInForce()) if (receiver.events.has(event.type)) endpoints.push(receiver.key);
    if (endpoints.length > 0) this.writer.push({ ...event, endpoints });
  }

  private countDropped(types: readonly WebhookEventType[]): void {
    for (const event of types) this.metrics.deliveries.inc({ event, result: 'dropped' });
    this.options.logger.error(
      { events: types.length },
      'webhook outbox full: oldest events dropped (notifications.outboxMaxEvents)',
    );
  }

  /** Deliveries to receivers no instance names any more (removed from the config), one type per delivery. */
  private countRemoved(types: readonly WebhookEventType[]): void {
    const byEvent: Partial<Record<WebhookEventType, number>> = {};
    for (const event of types) {
      this.metrics.deliveries.inc({ event, result: 'dropped' });
      byEvent[event] = (byEvent[event] ?? 0) + 1;
    }
    this.options.logger.warn(
      { deliveries: types.length, byEvent },
      'webhook deliveries to receivers no longer in the config dropped from the outbox',
    );
  }

  /**
   * A key was revoked (or asked to be again: its first `revokedAt` names the same event). A repeat
   * more than a day later is not sent: the revocation was announced when it happened.
   */
  keyRevoked(key: { id: string; consumerId?: string; revokedAt: string | null }, by: RevokedBy): void {
    if (key.revokedAt === null || !this.wanted('key.revoked')) return;
    const revokedAt = Date.parse(key.revokedAt);
    const event = keyRevokedEvent(key.id, key.consumerId ?? null, revokedAt, by, this.options.clock.now());
    if (event.seenUntil <= event.createdAt) return;
    this.emit(event);
  }

  /** Stops finding and delivering; what was found is written to the outbox first. */
  async close(): Promise<void> {
    this.expiring.close();
    await this.writer.close();
    await this.dispatcher.close();
    await this.roster.close();
    await this.sender.close();
  }
}
