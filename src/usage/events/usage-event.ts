import { createHash } from 'node:crypto';
import type { UsageMeter } from '../../shared/config';

/**
 * One usage event as sent (CONTRACT §5, Usage events; docs/metering.md): a CloudEvent 1.0 in
 * structured JSON. Its id is derived from what it counts, never drawn at random, so the same period
 * always carries the same id from whichever instance sends it, as often as it is sent.
 */

/** The CloudEvents `type` of each meter. */
export const USAGE_EVENT_TYPES: Readonly<Record<UsageMeter, string>> = {
  units: 'gateway.usage.units',
  requests: 'gateway.usage.requests',
  refusals: 'gateway.usage.refusals',
};

/** What one event counts: a key's figures in one period, or (revision > 0) what was added to them since. */
export interface UsageFigures {
  units: number;
  admitted: number;
  /** Rate-limited and banned requests. */
  refused: number;
}

export interface UsageEventInput extends UsageFigures {
  source: string;
  meter: UsageMeter;
  keyId: string;
  consumerId: string | null;
  plan: string | null;
  periodStart: number;
  periodMs: number;
  /** 0 for the period's first event; 1, 2, … for each later correction. */
  revision: number;
}

export interface UsageCloudEvent {
  specversion: '1.0';
  id: string;
  source: string;
  type: string;
  subject: string;
  time: string;
  datacontenttype: 'application/json';
  data: {
    keyId: string;
    consumerId: string | null;
    plan: string | null;
    units: number;
    admitted: number;
    refused: number;
    periodStart: string;
    periodEnd: string;
    revision: number;
  };
}

/** RFC 9562's namespace for names that are URLs: the name below is one in all but scheme. */
const NAMESPACE = Buffer.from('6ba7b8119dad11d180b400c04fd430c8', 'hex');

/**
 * A UUID version 5 of `usage:<source>/<key>/<meter>/<period ms>/<period start>/<revision>`: the
 * same (source, key, meter, period, revision) always gives the same id, and any other gives another.
 */
export function usageEventId(
  e: Pick<UsageEventInput, 'source' | 'keyId' | 'meter' | 'periodMs' | 'periodStart' | 'revision'>,
): string {
  const name = `usage:${e.source}/${e.keyId}/${e.meter}/${e.periodMs}/${e.periodStart}/${e.revision}`;
  const hash = createHash('sha1').update(NAMESPACE).update(name, 'utf8').digest();
  hash[6] = (hash[6]! & 0x0f) | 0x50;
  hash[8] = (hash[8]! & 0x3f) | 0x80;
  const hex = hash.subarray(0, 16).toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20, 32)}`;
}

/** The meter's own figure of an event: what a sink sums. */
export function meterValue(meter: UsageMeter, figures: UsageFigures): number {
  return meter === 'units' ? figures.units : meter === 'requests' ? figures.admitted : figures.refused;
}

export function usageCloudEvent(e: UsageEventInput): UsageCloudEvent {
  return {
    specversion: '1.0',
    id: usageEventId(e),
    source: e.source,
    type: USAGE_EVENT_TYPES[e.meter],
    // A consumer is who is billed; a key without one is billed alone.
    subject: e.consumerId ?? e.keyId,
    time: new Date(e.periodStart).toISOString(),
    datacontenttype: 'application/json',
    data: {
      keyId: e.keyId,
      consumerId: e.consumerId,
      plan: e.plan,
      units: e.units,
      admitted: e.admitted,
      refused: e.refused,
      periodStart: new Date(e.periodStart).toISOString(),
      periodEnd: new Date(e.periodStart + e.periodMs).toISOString(),
      revision: e.revision,
    },
  };
}
