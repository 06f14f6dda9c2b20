import dns from 'node:dns';
import { isLocalhostName, reachesAdminListener, type AdminListenerAddress } from '../http/admin-listener-address';
import { canonicalAddress } from '../http/ip-address';
import { settingName } from './environment';
import type { NotificationsConfig } from './notifications';
import { urlPort } from './notifications';

/** Resolves a host name to its addresses; none when it does not resolve. */
export type HostLookup = (host: string) => Promise<string[]>;

/**
 * How long a start or a reload waits for one name: a resolver that does not answer must not hold
 * them up, and a name that cannot be resolved now is no receiver of ours now. The send-time check
 * (src/notifications/sender.ts) holds whatever a name resolves to later.
 */
export const WEBHOOK_LOOKUP_TIMEOUT_MS = 2_000;

/** dns.lookup (what a delivery's connection uses: /etc/hosts first), all addresses, bounded in time. */
export const lookupHost: HostLookup = async (host) => {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<string[]>((resolve) => {
    timer = setTimeout(() => resolve([]), WEBHOOK_LOOKUP_TIMEOUT_MS);
  });
  const answer = dns.promises.lookup(host, { all: true }).then(
    (entries) => entries.map((entry) => entry.address),
    () => [],
  );
  try {
    return await Promise.race([answer, late]);
  } finally {
    clearTimeout(timer);
  }
};

/** What one receiver's URL reaches of the admin listener: the address, or null when nothing. */
async function adminAddressReached(
  url: string,
  admin: AdminListenerAddress,
  lookup: HostLookup,
): Promise<{ host: string; address: string } | null> {
  if (!URL.canParse(url)) return null;
  const parsed = new URL(url);
  const port = urlPort(parsed);
  if (port !== admin.port) return null;
  const host = parsed.hostname.replace(/^\[|\]$/g, '').toLowerCase();
  if (isLocalhostName(host)) return { host, address: host };
  const addresses = canonicalAddress(host) === null ? await lookup(host) : [host];
  const address = addresses.find((candidate) => reachesAdminListener(candidate, port, admin));
  return address === undefined ? null : { host, address };
}

/**
 * The config-error lines of receivers whose URL reaches the admin listener as it listens now (its
 * port, which config validation cannot know when it is 0): names are resolved as a delivery would
 * resolve them (`localhost6`, a name in /etc/hosts, a DNS name pointing at 127.0.0.1), addresses
 * read in every form. Asked at start and on a reload that changes `notifications`; a name that
 * does not resolve within WEBHOOK_LOOKUP_TIMEOUT_MS passes here and meets the send-time check.
 */
export async function webhookTargetProblems(
  notifications: NotificationsConfig,
  admin: AdminListenerAddress,
  lookup: HostLookup = lookupHost,
): Promise<string[]> {
  const reached = await Promise.all(
    notifications.webhooks.map((webhook) => adminAddressReached(webhook.url, admin, lookup)),
  );
  const problems: string[] = [];
  for (const [i, hit] of reached.entries()) {
    if (hit === null) continue;
    const via = hit.address === hit.host ? '' : ` (${hit.host} resolves to ${hit.address})`;
    problems.push(
      `invalid setting ${settingName(['notifications', 'webhooks', i, 'url'])}: points at this gateway's admin listener (${admin.host}:${admin.port})${via}; a receiver must be another service`,
    );
  }
  return problems;
}
