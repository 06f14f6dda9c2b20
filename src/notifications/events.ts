import { createHash } from 'node:crypto';
import type { WebhookEventType } from '../shared/config';

/**
 * The events the gateway posts (CONTRACT §5, Notifications), each as it will be sent: its
 * `webhook-id` and its JSON body are fixed when the event is detected, so every attempt, from
 * whichever instance, carries the same id and the same signed bytes.
 */

export interface WebhookEvent {
  /** The `webhook-id`: derived from what happened, never drawn at random (see eventId). */
  id: string;
  type: WebhookEventType;
  /** `{type, timestamp, data}` as sent. */
  body: string;
  /** Epoch ms the gateway saw it: where its 24 hours of retries start. */
  createdAt: number;
  /**
   * Epoch ms until which a second detection of the same event is recognised as the same one (an
   * enqueue retried, the expiring-key check of every instance): past the period it belongs to.
   */
  seenUntil: number;
}

/** Whose window a quota event is about: a key's own, or its consumer's (shared by all its keys). */
export type QuotaScope = 'key' | 'consumer';

/** One threshold of one window passed by one admitted request. */
export interface QuotaCrossing {
  scope: QuotaScope;
  /** The key whose request passed it. */
  keyId: string;
  /** The key's consumer; null while the key has none (and until consumers exist). */
  consumerId: string | null;
  /** `day` or `month`; a consumer's window is reported as `consumer-day` or `consumer-month`. */
  window: 'day' | 'month';
  /** Percent of the limit: 80, 90 or 100. */
  threshold: number;
  limit: number;
  /** Units of the window used after the request that passed the threshold. */
  used: number;
  /** Epoch ms the window's period started and ends. */
  periodStart: number;
  periodEnd: number;
  /** Epoch ms of the decision (the store's clock). */
  at: number;
}

const DAY_MS = 86_400_000;

/**
 * The `webhook-id` of an event: a digest of what identifies it, so that the instance that saw it,
 * another one retrying its enqueue, or every instance noticing the same expiring key, all name it
 * alike, and the outbox keeps it once.
 */
export function eventId(...identity: Array<string | number>): string {
  return `msg_${createHash('sha256').update(identity.join('\n')).digest('hex').slice(0, 32)}`;
}

function event(
  type: WebhookEventType,
  id: string,
  at: number,
  seenUntil: number,
  data: Record<string, unknown>,
): WebhookEvent {
  const body = JSON.stringify({ type, timestamp: new Date(at).toISOString(), data });
  return { id, type, body, createdAt: at, seenUntil };
}

/** `quota.threshold`: once per threshold, window and period, whoever's request passed it. */
export function quotaThresholdEvent(crossing: QuotaCrossing): WebhookEvent {
  const subject = crossing.scope === 'key' ? crossing.keyId : crossing.consumerId!;
  const window = crossing.scope === 'key' ? crossing.window : `consumer-${crossing.window}`;
  const id = eventId(
    'quota.threshold',
    crossing.scope,
    subject,
    crossing.window,
    crossing.periodStart,
    crossing.threshold,
  );
  return event('quota.threshold', id, crossing.at, crossing.periodEnd + DAY_MS, {
    keyId: crossing.keyId,
    consumerId: crossing.consumerId,
    window,
    threshold: crossing.threshold,
    limit: crossing.limit,
    used: crossing.used,
    periodEnd: new Date(crossing.periodEnd).toISOString(),
  });
}

/** `key.banned`: the one refusal that banned the key; a ban ends at a unique instant. */
export function keyBannedEvent(
  keyId: string,
  consumerId: string | null,
  bannedUntil: number,
  at: number,
): WebhookEvent {
  return event('key.banned', eventId('key.banned', keyId, bannedUntil), at, bannedUntil + DAY_MS, {
    keyId,
    consumerId,
    bannedUntil: new Date(bannedUntil).toISOString(),
  });
}

/** `key.expiring`: 7 days before the key's expiry; a new expiry is a new event. */
export function keyExpiringEvent(
  keyId: string,
  consumerId: string | null,
  expiresAt: number,
  at: number,
): WebhookEvent {
  return event('key.expiring', eventId('key.expiring', keyId, expiresAt), at, expiresAt + DAY_MS, {
    keyId,
    consumerId,
    expiresAt: new Date(expiresAt).toISOString(),
  });
}

/** Who revoked a key: an admin, its holder (POST /v1/keys/revoke), or a secret-scanning partner's report. */
export type RevokedBy = 'admin' | 'holder' | 'secret-scanning';

/**
 * `key.revoked`: once per key, since a revocation keeps its first `revokedAt` (revoking again
 * names the same event, which the outbox recognises for a day).
 */
export function keyRevokedEvent(
  keyId: string,
  consumerId: string | null,
  revokedAt: number,
  by: RevokedBy,
  at: number,
): WebhookEvent {
  return event('key.revoked', eventId('key.revoked', keyId, revokedAt), at, revokedAt + DAY_MS, {
    keyId,
    consumerId,
    revokedAt: new Date(revokedAt).toISOString(),
    by,
  });
}
