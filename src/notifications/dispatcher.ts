import type { Clock } from '../shared/clock';
import type { Logger } from '../shared/logger';
import { nextAttemptAt } from './backoff';
import type { Endpoint } from './endpoints';
import type { NotificationMetrics } from './notification-metrics';
import type { ClaimedDelivery, Outbox } from './outbox';
import type { WebhookSender } from './sender';
import { webhookHeaders } from './signature';

/** How often the outbox is asked for due deliveries when nothing woke the dispatcher sooner. */
export const POLL_INTERVAL_MS = 500;
/** Attempts in flight per receiver: a receiver that hangs holds these and nothing else. */
export const ATTEMPTS_PER_ENDPOINT = 4;
/** A claim outlives the attempt's timeout by this much, so it never lapses while the attempt runs. */
const LEASE_SLACK_MS = 30_000;
/** At most one line a minute about an outbox that does not answer. */
const OUTBOX_ERROR_LOG_INTERVAL_MS = 60_000;

export interface DispatcherOptions {
  outbox: Outbox;
  sender: Pick<WebhookSender, 'post'>;
  clock: Clock;
  logger: Logger;
  metrics: NotificationMetrics;
  /** The receivers of the config in force (a reload may change them), asked at each poll. */
  endpoints(): readonly Endpoint[];
  /** Config `notifications.timeoutMs`, read per claim. */
  timeoutMs(): number;
  random?: () => number;
  pollIntervalMs?: number;
}

/**
 * Delivers what the outbox holds, on every instance at once: each poll claims (under a lease) what
 * is due for each receiver this instance knows, up to ATTEMPTS_PER_ENDPOINT at a time, and posts
 * it. A 2xx finishes the delivery; anything else reschedules it by the backoff, until a day of
 * retries has passed. Nothing here is awaited by a request.
 */
export class WebhookDispatcher {
  private readonly inFlight = new Map<string, number>();
  private readonly stopping = new AbortController();
  private readonly attempts = new Set<Promise<void>>();
  private timer: NodeJS.Timeout | null = null;
  private polling = false;
  /** The last poll: close waits for it, so that what a poll under way claims is given back. */
  private lastPoll: Promise<void> = Promise.resolve();
  private pollAgain = false;
  private lastOutboxErrorAt = Number.NEGATIVE_INFINITY;

  constructor(private readonly options: DispatcherOptions) {}

  /**
   * Polls from now on. The timer runs whatever the config says (a reload may add the first
   * receiver); a tick with no receivers in force asks the outbox nothing.
   */
  start(): void {
    if (this.timer !== null || this.stopping.signal.aborted) return;
    this.timer = setInterval(() => this.wake(), this.options.pollIntervalMs ?? POLL_INTERVAL_MS).unref();
    this.wake();
  }

  /** Look at the outbox now (an event was just written, or an attempt just finished). */
  wake(): void {
    if (this.stopping.signal.aborted || this.options.endpoints().length === 0) return;
    if (this.polling) {
      this.pollAgain = true;
      return;
    }
    this.lastPoll = this.poll();
  }

  private async poll(): Promise<void> {
    this.polling = true;
    try {
      do {
        this.pollAgain = false;
        for (const endpoint of this.options.endpoints()) await this.claimFor(endpoint);
      } while (this.pollAgain && !this.stopping.signal.aborted);
    } catch (err) {
      this.reportOutboxError(err);
    } finally {
      this.polling = false;
    }
  }

  private async claimFor(endpoint: Endpoint): Promise<void> {
    const free = ATTEMPTS_PER_ENDPOINT - (this.inFlight.get(endpoint.key) ?? 0);
    if (free <= 0) return;
    const now = this.options.clock.now();
    const claimed = await this.options.outbox.claim(
      endpoint.key,
      free,
      now,
      now + this.options.timeoutMs() + LEASE_SLACK_MS,
    );
    for (const delivery of claimed) this.track(this.attempt(endpoint, delivery));
  }

  private track(attempt: Promise<void>): void {
    this.attempts.add(attempt);
    void attempt.finally(() => this.attempts.delete(attempt));
  }

  private async attempt(endpoint: Endpoint, delivery: ClaimedDelivery): Promise<void> {
    const { outbox, clock, metrics } = this.options;
    this.inFlight.set(endpoint.key, (this.inFlight.get(endpoint.key) ?? 0) + 1);
    try {
      // Claimed while closing (a poll under way): given back untried.
      if (this.stopping.signal.aborted) {
        await outbox.release(delivery, clock.now());
        return;
      }
      const headers = webhookHeaders(endpoint.secret, delivery.eventId, clock.now(), delivery.body);
      const outcome = await this.options.sender.post(endpoint.url, headers, delivery.body, this.stopping.signal);
      if (this.stopping.signal.aborted && !outcome.delivered) {
        await outbox.release(delivery, clock.now());
        return;
      }
      if (outcome.delivered) {
        await outbox.finish(delivery);
        metrics.deliveries.inc({ event: delivery.type, result: 'success' });
        return;
      }
      const attemptsMade = delivery.attempts + 1;
      const nextAt = nextAttemptAt(attemptsMade, delivery.createdAt, clock.now(), this.options.random);
      const line = {
        webhookId: delivery.eventId,
        event: delivery.type,
        url: endpoint.shownUrl,
        attempts: attemptsMade,
        reason: outcome.reason,
      };
      if (nextAt === null) {
        await outbox.finish(delivery);
        metrics.deliveries.inc({ event: delivery.type, result: 'expired' });
        this.options.logger.error(line, 'webhook given up after a day of retries');
        return;
      }
      await outbox.retry(delivery, nextAt);
      metrics.deliveries.inc({ event: delivery.type, result: 'failure' });
      this.options.logger.warn(
        { ...line, nextAttemptAt: new Date(nextAt).toISOString() },
        'webhook delivery failed; retrying later',
      );
    } catch (err) {
      // The outbox did not take the outcome: the claim lapses and the delivery is tried again.
      this.reportOutboxError(err);
    } finally {
      this.inFlight.set(endpoint.key, (this.inFlight.get(endpoint.key) ?? 1) - 1);
      this.wake();
    }
  }

  private reportOutboxError(err: unknown): void {
    const now = Date.now();
    if (now - this.lastOutboxErrorAt < OUTBOX_ERROR_LOG_INTERVAL_MS) return;
    this.lastOutboxErrorAt = now;
    this.options.logger.warn({ err: (err as Error).message }, 'webhook outbox does not answer; deliveries wait');
  }

  private stopTimer(): void {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
  }

  /**
   * Stops polling and aborts attempts in flight; their deliveries go back to the outbox, due at
   * once, and so do those a poll under way claims (after the poll answers, before close returns).
   */
  async close(): Promise<void> {
    this.stopTimer();
    this.stopping.abort();
    await this.lastPoll;
    await Promise.allSettled([...this.attempts]);
  }
}
