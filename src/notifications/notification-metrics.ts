import { Counter, Gauge, type Registry } from 'prom-client';
import { WEBHOOK_EVENT_TYPES } from '../shared/config';

/**
 * What became of each delivery attempt (one label set per event type and result, all closed):
 * `success` a 2xx, `failure` anything else (an error status, a redirect, a timeout, no connection:
 * tried again later), `expired` given up after a day of retries, `dropped` never to be attempted
 * again: an event the outbox dropped past its bound (counted once per event, not per receiver), or
 * a delivery to a receiver no instance's config names any more (once per delivery, receiver-roster.ts).
 */
export const DELIVERY_RESULTS = ['success', 'failure', 'expired', 'dropped'] as const;
export type DeliveryResult = (typeof DELIVERY_RESULTS)[number];

export function createNotificationMetrics(registry: Registry, outboxSize: () => Promise<number>) {
  const deliveries = new Counter({
    name: 'gateway_webhook_deliveries_total',
    help: 'Webhook delivery attempts by event type and result (success, failure: retried later, expired: given up after a day, dropped: past the outbox bound, or its receiver removed from the config).',
    labelNames: ['event', 'result'] as const,
    registers: [registry],
  });
  // Every series from the start, at 0: an alert's increase() needs the series before the first failure.
  for (const event of WEBHOOK_EVENT_TYPES) for (const result of DELIVERY_RESULTS) deliveries.inc({ event, result }, 0);
  const outboxEvents = outboxSizeGauge(
    registry,
    'gateway_webhook_outbox_events',
    'Webhook events waiting for at least one receiver, across every instance sharing the store.',
    outboxSize,
  );
  return { deliveries, outboxEvents };
}

export type NotificationMetrics = ReturnType<typeof createNotificationMetrics>;

/** An outbox's size, read at scrape time: the webhooks' and the usage events' alike. */
export function outboxSizeGauge(
  registry: Registry,
  name: string,
  help: string,
  outboxSize: () => Promise<number>,
): Gauge {
  return new Gauge({
    name,
    help,
    registers: [registry],
    // Every worker reads the same shared outbox: summing would multiply it.
    aggregator: 'max',
    async collect() {
      // A scrape during a store outage keeps the last value rather than failing the whole scrape.
      try {
        this.set(await outboxSize());
      } catch {
        /* kept */
      }
    },
  });
}
