import { Counter, type Registry } from 'prom-client';
import { outboxSizeGauge } from '../../notifications/notification-metrics';

/**
 * `success` an event in a batch the sink took (2xx), `failure` one in a batch it refused or never
 * answered (tried again), `expired` given up after USAGE_RETRY_FOR_MS, `dropped` past the outbox's bound.
 */
export const USAGE_EVENT_RESULTS = ['success', 'failure', 'expired', 'dropped'] as const;

export function createUsageEventMetrics(registry: Registry, outboxSize: () => Promise<number>) {
  const events = new Counter({
    name: 'gateway_usage_events_total',
    help: 'Usage events (CloudEvents to the metering sink) by result: success, failure (retried), expired (given up), dropped (past the outbox bound).',
    labelNames: ['result'] as const,
    registers: [registry],
  });
  // Every series from the start, at 0: an alert's increase() needs the series before the first failure.
  for (const result of USAGE_EVENT_RESULTS) events.inc({ result }, 0);
  const outboxEvents = outboxSizeGauge(
    registry,
    'gateway_usage_events_outbox_events',
    'Usage events waiting for the sink, across every instance sharing the store.',
    outboxSize,
  );
  return { events, outboxEvents };
}

export type UsageEventMetrics = ReturnType<typeof createUsageEventMetrics>;
