import type { Clock } from '../../shared/clock';
import type { Logger } from '../../shared/logger';
import type { UsageEventsConfig } from '../../shared/config';
import type { ClaimedDelivery, Outbox } from '../../notifications/outbox';
import type { WebhookSender } from '../../notifications/sender';
import { nextUsageAttemptAt } from './usage-backoff';
import type { UsageEventMetrics } from './usage-metrics';
import { USAGE_SINK_ENDPOINT } from './period-closer';

/** Events per POST at most (OpenMeter takes batches of this size easily). */
export const USAGE_BATCH_EVENTS = 100;
/** A claim outlives the attempt's timeout by this much. */
const LEASE_SLACK_MS = 30_000;
/** At most one line a minute about a sink that refuses. */
const LOG_INTERVAL_MS = 60_000;

export interface UsageDispatcherOptions {
  outbox: Outbox;
  sender: WebhookSender;
  clock: Clock;
  logger: Logger;
  metrics: UsageEventMetrics;
  config(): UsageEventsConfig;
  /** The headers of the sink in force (its token read from its file), made once per config. */
  headers(): Record<string, string>;
  periodMs(): number;
}

/**
 * Sends what the usage outbox holds, in batches of USAGE_BATCH_EVENTS as
 * `application/cloudevents-batch+json`: each batch is claimed under a lease (two instances never send
 * the same one at once), finished whole on a 2xx, retried whole otherwise. A batch sent twice (an
 * answer lost) is harmless: its ids are the same.
 */
export class UsageDispatcher {
  private readonly stopping = new AbortController();
  private sending: Promise<void> | null = null;
  private again = false;
  private lastLogAt = Number.NEGATIVE_INFINITY;

  constructor(private readonly options: UsageDispatcherOptions) {}

  /** Sends until nothing is due; a call while sending makes it look once more. */
  wake(): Promise<void> {
    if (this.stopping.signal.aborted) return Promise.resolve();
    if (this.sending) {
      this.again = true;
      return this.sending;
    }
    this.sending = this.sendAll().finally(() => {
      this.sending = null;
    });
    return this.sending;
  }

  private async sendAll(): Promise<void> {
    do {
      this.again = false;
      const config = this.options.config();
      if (!config.enabled || config.url === null) return;
      try {
        while (!this.stopping.signal.aborted && (await this.sendBatch(config)) === USAGE_BATCH_EVENTS);
      } catch (err) {
        this.log('usage-event outbox does not answer; events wait', err);
      }
    } while (this.again && !this.stopping.signal.aborted);
  }

  /** One batch: how many events it held. */
  private async sendBatch(config: UsageEventsConfig): Promise<number> {
    const { outbox, clock, metrics } = this.options;
    const now = clock.now();
    const batch = await outbox.claim(
      USAGE_SINK_ENDPOINT,
      USAGE_BATCH_EVENTS,
      now,
      now + config.timeoutMs + LEASE_SLACK_MS,
    );
    if (batch.length === 0) return 0;
    const body = `[${batch.map((d) => d.body).join(',')}]`;
    const headers = { ...this.options.headers(), 'content-type': 'application/cloudevents-batch+json' };
    const outcome = await this.options.sender.post(config.url!, headers, body, this.stopping.signal);
    if (this.stopping.signal.aborted && !outcome.delivered) {
      await Promise.all(batch.map((d) => outbox.release(d, clock.now())));
      return 0;
    }
    if (outcome.delivered) {
      await Promise.all(batch.map((d) => outbox.finish(d)));
      metrics.events.inc({ result: 'success' }, batch.length);
      return batch.length;
    }
    await this.reschedule(batch, outcome.reason);
    return 0;
  }

  private async reschedule(batch: readonly ClaimedDelivery[], reason: string): Promise<void> {
    const { outbox, clock, metrics } = this.options;
    let expired = 0;
    for (const d of batch) {
      const nextAt = nextUsageAttemptAt(d.attempts + 1, d.createdAt, clock.now(), this.options.periodMs());
      if (nextAt === null) {
        expired += 1;
        await outbox.finish(d);
      } else {
        await outbox.retry(d, nextAt);
      }
    }
    metrics.events.inc({ result: 'failure' }, batch.length - expired);
    if (expired > 0) metrics.events.inc({ result: 'expired' }, expired);
    this.log(`usage-event sink refused a batch of ${batch.length} (${reason}); retrying with backoff`, null, expired);
  }

  private log(message: string, err: unknown, expired = 0): void {
    if (expired > 0) this.options.logger.error({ expired }, 'usage events given up after their retries');
    const now = performance.now();
    if (now - this.lastLogAt < LOG_INTERVAL_MS) return;
    this.lastLogAt = now;
    this.options.logger.warn(err ? { err: (err as Error).message } : {}, message);
  }

  async close(): Promise<void> {
    this.stopping.abort();
    await this.sending;
  }
}
