import fs from 'node:fs';
import { z } from 'zod';
import { httpUrl, wholeNumber } from './fields';
import { isLocalhostName, reachesAdminListener } from '../http/admin-listener-address';

/**
 * Config `notifications` (CONTRACT §5, Notifications): the webhook receivers and the outbox's
 * bounds. The schema checks each field on its own; `notificationIssues` checks what needs the rest
 * of the config (the admin listener's address) or the disk (a secret file), one line per problem.
 */

/** The events a receiver may subscribe to (the `type` of each body). */
export const WEBHOOK_EVENT_TYPES = ['quota.threshold', 'key.banned', 'key.expiring', 'key.revoked'] as const;
export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];

/** Standard Webhooks: a secret is `whsec_` and the base64 of 24 to 64 random bytes. */
const SECRET_PREFIX = 'whsec_';
const MIN_SECRET_BYTES = 24;
const MAX_SECRET_BYTES = 64;
const SECRET_HINT = `must be ${SECRET_PREFIX} followed by the base64 of ${MIN_SECRET_BYTES} to ${MAX_SECRET_BYTES} random bytes, e.g. ${SECRET_PREFIX}$(openssl rand -base64 32)`;

const webhookSchema = z.strictObject({
  url: httpUrl,
  /** `whsec_<base64>`; or `secretFile`, a file holding it (Docker and Kubernetes secrets). */
  secret: z.string().nullable().optional(),
  secretFile: z.string().min(1).nullable().optional(),
  /** The events this receiver gets; absent: all of them. */
  events: z
    .array(z.enum(WEBHOOK_EVENT_TYPES, { error: `must be one of ${WEBHOOK_EVENT_TYPES.join(', ')}` }))
    .min(1, { error: 'must list at least one event' })
    .optional(),
});
export type WebhookConfig = z.infer<typeof webhookSchema>;

export const notificationsSchema = z.strictObject({
  webhooks: z.array(webhookSchema),
  /** Events the outbox holds at most; past it the oldest are dropped and counted. */
  outboxMaxEvents: wholeNumber(10, 10_000_000),
  /** One delivery's whole POST, connection to the end of the answer. */
  timeoutMs: wholeNumber(100, 60_000),
});
export type NotificationsConfig = z.infer<typeof notificationsSchema>;

/** The key bytes of a `whsec_` secret, or null when it is not one. */
export function webhookSecretBytes(secret: string): Buffer | null {
  if (!secret.startsWith(SECRET_PREFIX)) return null;
  const encoded = secret.slice(SECRET_PREFIX.length);
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(encoded) || encoded.length % 4 !== 0) return null;
  const bytes = Buffer.from(encoded, 'base64');
  return bytes.length >= MIN_SECRET_BYTES && bytes.length <= MAX_SECRET_BYTES ? bytes : null;
}

/** The secret of a receiver as configured: inline, or read from its file (one trailing newline dropped). */
export function readWebhookSecret(webhook: Pick<WebhookConfig, 'secret' | 'secretFile'>): string | null {
  if (webhook.secret) return webhook.secret;
  if (!webhook.secretFile) return null;
  return fs.readFileSync(webhook.secretFile, 'utf8').replace(/\r?\n$/, '');
}

type Issue = { path: (string | number)[]; message: string };

/** One issue per receiver whose secret is missing, doubled, unreadable or not a `whsec_` secret. */
function secretIssues(webhook: WebhookConfig, at: (string | number)[]): Issue[] {
  const inline = webhook.secret !== undefined && webhook.secret !== null;
  const file = webhook.secretFile !== undefined && webhook.secretFile !== null;
  if (inline && file) return [{ path: [...at, 'secretFile'], message: 'secret is set too; set one of them, not both' }];
  if (!inline && !file) return [{ path: [...at, 'secret'], message: `is required (or secretFile): ${SECRET_HINT}` }];
  let secret: string | null;
  try {
    secret = readWebhookSecret(webhook);
  } catch (err) {
    return [
      {
        path: [...at, 'secretFile'],
        message: `${webhook.secretFile} cannot be read (${(err as NodeJS.ErrnoException).code ?? 'error'})`,
      },
    ];
  }
  if (secret !== null && webhookSecretBytes(secret) !== null) return [];
  // Never the secret itself: only which setting holds it.
  return [
    {
      path: [...at, file ? 'secretFile' : 'secret'],
      message: file
        ? `${webhook.secretFile} does not hold a secret that ${SECRET_HINT.replace(/^must be/, 'is')}`
        : SECRET_HINT,
    },
  ];
}

/** The port a URL connects to: its own, or its scheme's. */
export function urlPort(url: URL): number {
  return url.port === '' ? (url.protocol === 'https:' ? 443 : 80) : Number(url.port);
}

/**
 * Whether a receiver's URL reaches this gateway's admin listener, as far as the URL alone shows:
 * a webhook body would be posted to the admin API, and a receiver there could only be a mistake
 * (or a way to probe it). Addresses are compared in their canonical form (`[::ffff:127.0.0.1]`,
 * `[::127.0.0.1]` and `[0:0:0:0:0:0:0:1]` are loopback); `localhost` and names under it are
 * loopback; other names are resolved by webhookTargetProblems (webhook-targets.ts), and the
 * address each delivery connects to is checked again when it is sent (src/notifications/sender.ts).
 */
export function pointsAtAdminListener(url: string, admin: { adminHost: string; adminPort: number }): boolean {
  // A URL that is not one has its own line already (the schema's).
  if (!URL.canParse(url)) return false;
  const parsed = new URL(url);
  const port = urlPort(parsed);
  if (port !== admin.adminPort) return false;
  const host = parsed.hostname.replace(/^\[|\]$/g, '').toLowerCase();
  const adminHost = admin.adminHost.replace(/^\[|\]$/g, '').toLowerCase();
  if (isLocalhostName(host) || host.replace(/\.$/, '') === adminHost.replace(/\.$/, '')) return true;
  return reachesAdminListener(host, port, { host: admin.adminHost, port: admin.adminPort });
}

/** Every problem of `notifications.webhooks` that needs more than one field to see. */
export function notificationIssues(
  notifications: NotificationsConfig,
  server: { adminHost: string; adminPort: number },
): Issue[] {
  const issues: Issue[] = [];
  const seen = new Set<string>();
  for (const [i, webhook] of notifications.webhooks.entries()) {
    const at = ['notifications', 'webhooks', i];
    issues.push(...secretIssues(webhook, at));
    if (pointsAtAdminListener(webhook.url, server)) {
      issues.push({
        path: [...at, 'url'],
        message: `points at this gateway's admin listener (${server.adminHost}:${server.adminPort}); a receiver must be another service`,
      });
    }
    if (seen.has(webhook.url))
      issues.push({ path: [...at, 'url'], message: 'is listed twice; give each receiver once, with all its events' });
    seen.add(webhook.url);
  }
  return issues;
}
