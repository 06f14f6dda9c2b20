import { createHash } from 'node:crypto';
import { redactedUrl } from '../redaction';
import type { Config } from './schema';

/** Config paths that hold secrets: never shown by GET /admin/config, never hashed in clear. */
export const SECRET_SETTINGS = [
  'admin.token',
  'signing.secret',
  'signing.previousSecrets',
  'redis.password',
  'redis.sentinelPassword',
] as const;

export const REDACTED = '[redacted]';

/**
 * `scheme://user:password@host…` with the password replaced (RFC 3986 userinfo): REDIS_URL may
 * carry the ACL user's password, INVENTORY_URL basic credentials. The user name stays, as it
 * tells the operator which account is in use.
 */
const URL_PASSWORD = /^([a-z][a-z0-9+.-]*:\/\/[^/?#@:]*):[^/?#]*@/i;

export function redactUrlPassword(value: string): string {
  return value.replace(URL_PASSWORD, `$1:${REDACTED}@`);
}

/** Every string below `value` with a password inside a URL redacted, wherever a setting holds one. */
function redactUrlPasswords(value: unknown): unknown {
  if (typeof value === 'string') return redactUrlPassword(value);
  if (Array.isArray(value)) return value.map(redactUrlPasswords);
  if (typeof value !== 'object' || value === null) return value;
  return Object.fromEntries(Object.entries(value).map(([key, inner]) => [key, redactUrlPasswords(inner)]));
}

/** The config as GET /admin/config shows it: each secret that is set replaced by "[redacted]", a password inside a URL included. */
export function redactedConfig(config: Config): Config {
  const copy = redactUrlPasswords(config) as Record<string, Record<string, unknown>>;
  for (const setting of SECRET_SETTINGS) {
    const [section, name] = setting.split('.') as [string, string];
    const value = copy[section]![name];
    if (Array.isArray(value)) copy[section]![name] = value.map(() => REDACTED);
    else if (value !== null && value !== undefined) copy[section]![name] = REDACTED;
  }
  const redacted = copy as unknown as Config;
  redacted.notifications.webhooks = redacted.notifications.webhooks.map(redactedWebhook);
  // The sink's URL as a receiver's is shown (a token is often its path or a query value), and its headers' values never.
  const usage = redacted.usageEvents;
  redacted.usageEvents = {
    ...usage,
    url: usage.url === null ? null : redactedUrl(usage.url),
    headers: Object.fromEntries(Object.keys(usage.headers).map((name) => [name, REDACTED])),
  };
  return redacted;
}

/**
 * A webhook receiver as shown: its secret replaced, and its URL as redactedUrl shows it (a
 * receiver's token often is the URL's path or a query value). So the hash, made of what is shown,
 * stays as it was when only such a token changes, as it does for a password.
 */
function redactedWebhook(
  webhook: Config['notifications']['webhooks'][number],
): Config['notifications']['webhooks'][number] {
  return { ...webhook, url: redactedUrl(webhook.url), ...(webhook.secret ? { secret: REDACTED } : {}) };
}

/** JSON with every object's keys sorted: the same config is the same text whatever order its files gave. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (typeof value === 'object' && value !== null) {
    const entries = Object.keys(value)
      .sort()
      .filter((key) => (value as Record<string, unknown>)[key] !== undefined)
      .map((key) => `${JSON.stringify(key)}:${canonicalJson((value as Record<string, unknown>)[key])}`);
    return `{${entries.join(',')}}`;
  }
  return JSON.stringify(value);
}

/**
 * sha256 (hex) of the redacted config's canonical JSON: equal on every instance that runs the same
 * settings, and no offline guess of a secret from it. It is served without a token
 * (gateway_config_info on /metrics), so nothing secret may enter it: a secret changed alone
 * (a new REDIS_URL password) leaves the hash as it was.
 */
export function configHash(config: Config): string {
  return createHash('sha256')
    .update(canonicalJson(redactedConfig(config)))
    .digest('hex');
}
