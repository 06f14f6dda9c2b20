import fs from 'node:fs';
import { z } from 'zod';
import { httpUrl, wholeNumber } from './fields';

/**
 * Config `usageEvents` (CONTRACT §5, Usage events): where the gateway sends a CloudEvent per key,
 * meter and closed period (src/usage/events), and how. Off by default; reloadable as a whole.
 */

/** What a period of usage is counted in: each event counts one of them (`usageEvents.period`). */
export const USAGE_PERIODS = { minute: 60_000, hour: 3_600_000 } as const;
export type UsagePeriod = keyof typeof USAGE_PERIODS;

/** The meters: one event type each (docs/metering.md). */
export const USAGE_METERS = ['units', 'requests', 'refusals'] as const;
export type UsageMeter = (typeof USAGE_METERS)[number];

const headerName = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

export const usageEventsSchema = z
  .strictObject({
    enabled: z.boolean(),
    /** The sink's ingest URL (OpenMeter: https://openmeter.cloud/api/v1/events). */
    url: httpUrl.nullable(),
    /** The CloudEvents `source`: part of every id, so two gateways sending to one sink never collide. */
    source: z.string().min(1).max(200),
    period: z.enum(['minute', 'hour'], { error: 'must be minute or hour' }),
    /**
     * For tests only (docs/metering.md): a period of this many seconds instead of `period`, which
     * must divide a day. Absent in production.
     */
    periodSeconds: wholeNumber(1, 3600).optional(),
    /** How long after a period ends it is closed and sent: every instance's flush (every 5 s) has landed by then. */
    graceSeconds: wholeNumber(1, 3600),
    meters: z
      .array(z.enum(USAGE_METERS, { error: `must be one of ${USAGE_METERS.join(', ')}` }))
      .min(1, { error: 'must list at least one meter' }),
    /** Extra request headers for the sink (never logged). */
    headers: z.record(z.string().regex(headerName, { error: 'must be an HTTP header name' }), z.string()),
    /** A file holding a bearer token for the sink (`Authorization: Bearer <token>`), read at each reload. */
    tokenFile: z.string().min(1).nullable(),
    /** One POST of a batch, connection to the end of the answer. */
    timeoutMs: wholeNumber(100, 60_000),
    /** Events the outbox holds at most; past it the oldest are dropped and counted. */
    outboxMaxEvents: wholeNumber(10, 100_000_000),
  })
  .default({
    enabled: false,
    url: null,
    source: 'animal-store-gateway',
    period: 'hour',
    graceSeconds: 15,
    meters: ['units', 'requests'],
    headers: {},
    tokenFile: null,
    timeoutMs: 5000,
    outboxMaxEvents: 1_000_000,
  });
export type UsageEventsConfig = z.infer<typeof usageEventsSchema>;

/** The period length in force, in ms. */
export function usagePeriodMs(config: UsageEventsConfig): number {
  return config.periodSeconds !== undefined ? config.periodSeconds * 1000 : USAGE_PERIODS[config.period];
}

/** The token of `tokenFile` (one trailing newline dropped), or null when none is configured. */
export function readUsageSinkToken(config: Pick<UsageEventsConfig, 'tokenFile'>): string | null {
  if (!config.tokenFile) return null;
  return fs.readFileSync(config.tokenFile, 'utf8').replace(/\r?\n$/, '');
}

type Issue = { path: (string | number)[]; message: string };

/** What needs more than one field: a URL when enabled, a period that divides the day, a readable token file. */
export function usageEventsIssues(config: UsageEventsConfig): Issue[] {
  const issues: Issue[] = [];
  if (config.enabled && config.url === null)
    issues.push({ path: ['usageEvents', 'url'], message: 'is required when usageEvents.enabled is true' });
  if (config.periodSeconds !== undefined && 86_400 % config.periodSeconds !== 0) {
    issues.push({
      path: ['usageEvents', 'periodSeconds'],
      message: 'must divide a day (86400 seconds), so that each period lies in one UTC day',
    });
  }
  if (config.tokenFile) {
    try {
      if (readUsageSinkToken(config) === '')
        issues.push({ path: ['usageEvents', 'tokenFile'], message: `${config.tokenFile} is empty` });
    } catch (err) {
      issues.push({
        path: ['usageEvents', 'tokenFile'],
        message: `${config.tokenFile} cannot be read (${(err as NodeJS.ErrnoException).code ?? 'error'})`,
      });
    }
  }
  if (config.tokenFile && Object.keys(config.headers).some((name) => name.toLowerCase() === 'authorization'))
    issues.push({
      path: ['usageEvents', 'headers'],
      message: 'has authorization and tokenFile is set too; set one of them',
    });
  return issues;
}
