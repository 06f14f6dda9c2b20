import { createHash } from 'node:crypto';
import { redactedUrl } from '../shared/redaction';
import {
  readWebhookSecret,
  webhookSecretBytes,
  WEBHOOK_EVENT_TYPES,
  type NotificationsConfig,
  type WebhookEventType,
} from '../shared/config';

/** One receiver of config `notifications.webhooks` as the request path sees it: who takes which events. */
export interface Receiver {
  /** Names the receiver in the outbox: a digest of its URL, the same on every instance. */
  key: string;
  events: ReadonlySet<WebhookEventType>;
}

/** One receiver of config `notifications.webhooks`, ready to sign for. */
export interface Endpoint extends Receiver {
  url: string;
  /** The URL as log lines show it (shownUrl): nothing that may carry its token. */
  shownUrl: string;
  /** The bytes of its `whsec_` secret. */
  secret: Buffer;
}

export function endpointKey(url: string): string {
  return createHash('sha256').update(url).digest('hex').slice(0, 16);
}

/**
 * Who takes which events, from the config alone (no secret read, so no I/O): what the request path
 * and the expiry watch ask before they hand an event on.
 */
export function receiversOf(config: NotificationsConfig): Receiver[] {
  return config.webhooks.map((webhook) => ({
    key: endpointKey(webhook.url),
    events: new Set(webhook.events ?? WEBHOOK_EVENT_TYPES),
  }));
}

/**
 * The receivers of a config that has been validated (so each secret is a `whsec_` secret, its file
 * readable a moment ago). A secret file that cannot be read now leaves that receiver out, reported.
 */
export function endpointsOf(
  config: NotificationsConfig,
  onUnreadable: (url: string, err: unknown) => void = () => {},
): Endpoint[] {
  const endpoints: Endpoint[] = [];
  for (const webhook of config.webhooks) {
    let secret: Buffer | null;
    try {
      const text = readWebhookSecret(webhook);
      secret = text === null ? null : webhookSecretBytes(text);
    } catch (err) {
      onUnreadable(shownUrl(webhook.url), err);
      continue;
    }
    if (secret === null) continue;
    endpoints.push({
      key: endpointKey(webhook.url),
      url: webhook.url,
      shownUrl: shownUrl(webhook.url),
      secret,
      events: new Set(webhook.events ?? WEBHOOK_EVENT_TYPES),
    });
  }
  return endpoints;
}

/** A receiver's URL as log lines show it: no password, path, query value or fragment, which may carry its token. */
export function shownUrl(url: string): string {
  return redactedUrl(url);
}
