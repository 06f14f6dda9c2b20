import type { Config } from './schema';

/**
 * What a running process can change under requests that start afterwards: each of these is read
 * from the one config in force (src/product/reload/config-state.ts) by whoever needs it, when it
 * needs it (the gateway's handler is built again for a new config; the key service, the admin API,
 * the embedded inventory and the metrics ask at use), and the TLS files when the pair is read. Everything else (listeners, Redis, workers, dataDir, the upstream,
 * the stores' limiters and windows, keys, signing) was wired into something opened once at start:
 * a change there is named in `restartNeeded` and left as it was.
 */
export const RELOADABLE_SETTINGS = [
  'plans',
  // With the plans: the file's plans are validated against the file's costs, so both go in force together.
  'costs',
  'deprecations',
  'cors',
  'rateLimit.retryAfterJitterSeconds',
  // Read by the leasing limiter at each request (src/limits/leases/leasing-key-limiter.ts).
  'rateLimit.leases',
  'server.trustedProxies',
  'server.publicBaseUrl',
  'server.maxBodyBytes',
  // Read by the webhook dispatcher on every poll (src/notifications): receivers, their secrets and events.
  'notifications',
  // Read by POST /admin/secret-scanning at each report: the partner's public keys.
  'secretScanning',
  // Read by the usage-event closer and sender at each tick (src/usage/events): sink, period, meters.
  'usageEvents',
  'tls.certFile',
  'tls.keyFile',
] as const;

export interface ReloadPlan {
  /** The config that will be in force: the current one with every reloadable change taken over. */
  inForce: Config;
  /** Reloadable settings that changed (dotted config paths). */
  applied: string[];
  /** Settings that changed but only take effect on a restart (dotted config paths). */
  restartNeeded: string[];
}

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

const isObject = (value: unknown): value is Record<string, Json> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** Dotted paths of the settings that differ; arrays (lists) compare whole, as config files replace them whole. */
export function changedSettings(before: unknown, after: unknown, prefix = ''): string[] {
  if (isObject(before) && isObject(after)) {
    const keys = new Set([...Object.keys(before), ...Object.keys(after)]);
    return [...keys].flatMap((key) => changedSettings(before[key], after[key], prefix ? `${prefix}.${key}` : key));
  }
  return JSON.stringify(before) === JSON.stringify(after) ? [] : [prefix];
}

function reloadableRoot(setting: string): string | undefined {
  return RELOADABLE_SETTINGS.find((root) => setting === root || setting.startsWith(`${root}.`));
}

function copyPath(target: Record<string, unknown>, source: Record<string, unknown>, dotted: string): void {
  const parts = dotted.split('.');
  const last = parts.pop()!;
  let to = target;
  let from = source;
  for (const part of parts) {
    to = to[part] as Record<string, unknown>;
    from = from[part] as Record<string, unknown>;
  }
  to[last] = structuredClone(from[last]);
}

/**
 * Compares the config in force with a freshly loaded (and already validated) one. Turning TLS on
 * or off changes the kind of listener, so only a change of files while TLS stays on is applied.
 */
export function planReload(current: Config, next: Config): ReloadPlan {
  const inForce = structuredClone(current);
  const applied = new Set<string>();
  const restartNeeded: string[] = [];
  const tlsToggled = (current.tls.certFile === null) !== (next.tls.certFile === null);
  for (const setting of changedSettings(current, next)) {
    const root = reloadableRoot(setting);
    if (root && !(tlsToggled && root.startsWith('tls.'))) applied.add(root);
    else restartNeeded.push(setting);
  }
  for (const root of applied) copyPath(inForce as never, next as never, root);
  return { inForce, applied: [...applied], restartNeeded };
}
