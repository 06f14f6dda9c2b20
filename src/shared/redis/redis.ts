import fs from 'node:fs';
import tls, { type ConnectionOptions } from 'node:tls';
import Redis, { Cluster, type RedisOptions } from 'ioredis';
import { SentinelClient } from './sentinel-client';

/** A single Redis or a Redis Cluster; everything above this module talks to either alike. */
export type RedisClient = Redis | Cluster;

export interface RedisSettings {
  url: string | null;
  clusterNodes: string[];
  commandTimeoutMs: number;
  /** Overrides nothing: config refuses a password in both REDIS_URL and REDIS_PASSWORD. */
  password?: string | null;
  /** Likewise for REDIS_USERNAME and a user in REDIS_URL. */
  username?: string | null;
  sentinels?: string[];
  sentinelName?: string;
  sentinelPassword?: string | null;
  tls?: { caFile: string | null; certFile: string | null; keyFile: string | null };
}

/**
 * TLS options from REDIS_TLS_*, read once (at startup, when the client is made), or null when none
 * is set. Verification is always on: a certificate the CA does not vouch for stops the connection.
 */
function tlsFromFiles(settings: RedisSettings): ConnectionOptions | null {
  const files = settings.tls;
  if (!files || (files.caFile === null && files.certFile === null)) return null;
  return {
    ...(files.caFile ? { ca: fs.readFileSync(files.caFile) } : {}),
    ...(files.certFile && files.keyFile
      ? { cert: fs.readFileSync(files.certFile), key: fs.readFileSync(files.keyFile) }
      : {}),
  };
}

function hostAndPort(node: string): { host: string; port: number } {
  const [host, port] = node.split(':');
  return { host: host!, port: Number(port) };
}

/**
 * Options chosen so that no request waits on a dead Redis: a command fails after
 * `commandTimeoutMs`, is not queued while disconnected, and is not retried; the connection itself
 * keeps reconnecting in the background so the gateway returns to Redis by itself.
 */
function baseOptions(settings: RedisSettings): RedisOptions {
  return {
    commandTimeout: settings.commandTimeoutMs,
    maxRetriesPerRequest: 0,
    enableOfflineQueue: false,
    connectTimeout: 2000,
    retryStrategy: (attempt) => Math.min(50 * attempt, 1000),
    lazyConnect: true,
    // No auto-pipelining (issue 51): it builds an ioredis Pipeline for each turn of the event loop,
    // which copies every defined script onto itself (35 here), a promise and a nextTick per
    // command: the Redis client row's largest share and about 5 KB of garbage per request. Each
    // command is written as it is issued; each request still makes its one round trip.
    enableAutoPipelining: false,
    ...(settings.username ? { username: settings.username } : {}),
    ...(settings.password ? { password: settings.password } : {}),
  };
}

/**
 * ioredis reads a user in the URL (`redis://gateway@host`) as that user with an empty password,
 * and the URL's fields win over the options: REDIS_USERNAME and REDIS_PASSWORD have to travel
 * inside the URL. It stays in memory; nothing logs the URL.
 */
function urlWithCredentials(url: string, settings: RedisSettings): string {
  if (!settings.password && !settings.username) return url;
  const parsed = new URL(url);
  if (settings.username) parsed.username = encodeURIComponent(settings.username);
  if (settings.password) parsed.password = encodeURIComponent(settings.password);
  return parsed.toString();
}

/** TLS for a single server's or a Cluster's connections: REDIS_TLS_* files, or rediss:// alone (system CAs). */
function withTls(options: RedisOptions, settings: RedisSettings): RedisOptions {
  const tls = tlsFromFiles(settings);
  return tls ? { ...options, tls } : options;
}

/**
 * Creates and connects a client; rejects if Redis does not answer within `connectTimeoutMs`. On a
 * Cluster that includes a connection to every master, so no request pays for one.
 */
export async function connectRedis(settings: RedisSettings, connectTimeoutMs = 5000): Promise<RedisClient> {
  const client = createRedisClient(settings);
  try {
    await waitUntilReady(client, connectTimeoutMs, true);
  } catch (err) {
    // ioredis drops the sentinels' own connection errors ("All sentinels are unreachable") and a
    // Cluster's ("Failed to refresh slots cache."); one TLS handshake with the first sentinel or
    // cluster node tells a certificate problem apart from an unreachable host.
    const tlsOptions = tlsFromFiles(settings);
    const firstNode = settings.sentinels?.[0] ?? settings.clusterNodes[0];
    if (firstNode && tlsOptions) {
      const line = await tlsHandshakeFailure(firstNode, tlsOptions);
      if (line) throw new Error(line, { cause: err });
    }
    // A TLS server that requires client certificates resets a client without one during the handshake.
    const usesTls = settings.url?.startsWith('rediss://') === true || tlsOptions !== null;
    if (usesTls && !settings.tls?.certFile && /\(ECONNRESET\)/.test((err as Error).message)) {
      throw new Error(
        'Redis closed the TLS connection during the handshake (ECONNRESET); if it requires client certificates, set REDIS_TLS_CERT_FILE and REDIS_TLS_KEY_FILE',
        { cause: err },
      );
    }
    throw err;
  }
  return client;
}

export function createRedisClient(settings: RedisSettings): RedisClient {
  const sentinels = settings.sentinels ?? [];
  if (sentinels.length > 0) {
    const tls = tlsFromFiles(settings);
    // The TLS and ACL settings are the data nodes' (CONTRACT §2); the sentinels speak plain TCP
    // unless the same files are meant for them too, which is the common case for managed setups.
    // A SentinelClient, not a plain Redis: ioredis alone could end for good during a failover.
    return new SentinelClient({
      ...baseOptions(settings),
      sentinels: sentinels.map(hostAndPort),
      name: settings.sentinelName ?? 'mymaster',
      ...(settings.sentinelPassword ? { sentinelPassword: settings.sentinelPassword } : {}),
      ...(tls ? { tls, enableTLSForSentinelMode: true, sentinelTLS: tls } : {}),
      // A failover: ask the sentinels again at once rather than wait out the backoff.
      sentinelRetryStrategy: (attempt) => Math.min(50 * attempt, 500),
      failoverDetector: true,
    });
  }
  if (settings.clusterNodes.length > 0) {
    const nodes = settings.clusterNodes.map(hostAndPort);
    return new Cluster(nodes, {
      // No auto-pipelining on a Cluster: under concurrent traffic ioredis 6's Cluster auto-pipeline
      // lost scripts defined meanwhile ("pipeline[functionName] is not a function") and failed
      // whole batches ("results[i] is not iterable") in our cluster suite.
      redisOptions: { ...withTls(baseOptions(settings), settings), enableAutoPipelining: false },
      enableOfflineQueue: false,
      lazyConnect: true,
      enableAutoPipelining: false,
      clusterRetryStrategy: (attempt) => Math.min(100 * attempt, 1000),
      // CLUSTER SLOTS is a command like any other: give it the configured command timeout (ioredis's
      // own 1 s, at the least). With 1 s fixed, a start on a crowded machine failed with "Failed to
      // refresh slots cache" although every node answered and the commands had 2 s.
      slotsRefreshTimeout: Math.max(1000, settings.commandTimeoutMs),
    });
  }
  if (!settings.url) throw new Error('createRedisClient needs a url or cluster nodes');
  return new Redis(urlWithCredentials(settings.url, settings), withTls(baseOptions(settings), settings));
}

/** Reconnect attempts of a Cluster subscriber before it ends and its owner opens one on another node. */
export const CLUSTER_SUBSCRIBER_RECONNECTS = 10;

/**
 * A second connection for SUBSCRIBE, which cannot share a connection with other commands.
 *
 * On a Cluster it is a plain connection to one master, not a Cluster client: Redis Cluster forwards
 * every (non-sharded) PUBLISH to all nodes, so one node hears them all. ioredis's own Cluster
 * subscriber moves to another node after a disconnect without any event, so its owner could not
 * know that changes were missed meanwhile; this one emits 'ready' after a reconnect like a single
 * Redis does, and 'end' after CLUSTER_SUBSCRIBER_RECONNECTS failed attempts, when the owner opens a
 * new one (on a master that answers) and resyncs.
 */
export async function duplicateForSubscribe(client: RedisClient, connectTimeoutMs = 5000): Promise<RedisClient> {
  const subscriber = client instanceof Cluster ? subscriberOnClusterNode(client) : client.duplicate();
  await waitUntilReady(subscriber, connectTimeoutMs);
  // Its connection errors are the command connection's too, which the caller logs; without a
  // listener ioredis would print each one with a stack.
  subscriber.on('error', () => {});
  markSubscribeRejectionsHandled(subscriber);
  return subscriber;
}

/**
 * ioredis subscribes a subscriber's channels again by itself when it reconnects (autoResubscribe)
 * and drops the promise: when the connection closes again at that moment ("Stream isn't writeable"
 * with the offline queue off), that rejection is unhandled, which ends a Node process (a CI run on
 * bac5e0b met it behind Sentinel while a primary was killed). Each subscribe's promise is marked
 * handled here; a caller that awaits it still gets the rejection, and the close that made the
 * resubscribe fail brings a reconnect and another resubscribe (or, behind Sentinel, the connection's
 * replacement: sentinel-client.ts).
 */
function markSubscribeRejectionsHandled(subscriber: RedisClient): void {
  const methods = subscriber as unknown as Record<string, (...args: unknown[]) => Promise<unknown>>;
  for (const name of ['subscribe', 'psubscribe', 'ssubscribe']) {
    const original = methods[name]!.bind(subscriber);
    methods[name] = (...args: unknown[]) => {
      const subscribed = original(...args);
      subscribed.catch(() => {});
      return subscribed;
    };
  }
}

function subscriberOnClusterNode(cluster: Cluster): Redis {
  const masters = cluster.nodes('master');
  const node = masters[Math.floor(Math.random() * masters.length)];
  if (!node) throw new Error('Redis is unreachable (the cluster has no master); check REDIS_CLUSTER_NODES');
  return new Redis({
    ...cluster.options.redisOptions,
    host: node.options.host,
    port: node.options.port,
    lazyConnect: true,
    retryStrategy: (attempt) => (attempt > CLUSTER_SUBSCRIBER_RECONNECTS ? null : Math.min(50 * attempt, 1000)),
  });
}

/**
 * ioredis opens a Cluster's connection to each master lazily, on the first command routed there, and
 * that command's `commandTimeout` runs while it connects: on a busy host the first requests after
 * startup would time out and send the limiters to their fallback. Opens them all now instead; a
 * master that does not answer is left to fail its own commands (the store's fail mode handles them)
 * rather than keep the rest of the cluster from being used.
 */
async function connectMasters(cluster: Cluster): Promise<void> {
  await Promise.allSettled(
    cluster.nodes('master').map(async (node) => {
      if (node.status === 'ready') return;
      if (node.status === 'wait') {
        await node.connect();
        return;
      }
      await new Promise<void>((resolve, reject) => {
        const ready = () => {
          node.off('end', ended);
          resolve();
        };
        const ended = () => {
          node.off('ready', ready);
          reject(new Error('a cluster node closed its connection while connecting'));
        };
        node.once('ready', ready);
        node.once('end', ended);
      });
    }),
  );
}

/** Connection failures that no retry will fix: the line says which setting to look at. */
function permanentFailure(err: Error): string | null {
  const code = (err as NodeJS.ErrnoException).code ?? '';
  const message = err.message ?? '';
  if (message.startsWith('WRONGPASS'))
    return 'Redis refused the user or password (WRONGPASS); check the user in REDIS_URL or REDIS_USERNAME, and REDIS_PASSWORD';
  if (message.startsWith('NOAUTH'))
    return 'Redis needs a password (NOAUTH); set REDIS_PASSWORD (or REDIS_PASSWORD_FILE)';
  if (message.startsWith('NOPERM'))
    return `the Redis user may not run a command the gateway needs (${message.split('\n')[0]}); see docs/redis.md, Redis ACL`;
  if (code.includes('CERTIFICATE_REQUIRED'))
    return `Redis requires a client certificate (${code}); set REDIS_TLS_CERT_FILE and REDIS_TLS_KEY_FILE`;
  if (code === 'ERR_TLS_CERT_ALTNAME_INVALID')
    return `Redis's TLS certificate does not name the host in REDIS_URL (${code})`;
  if (/CERT|SELF_SIGNED|UNABLE_TO_VERIFY|UNABLE_TO_GET_ISSUER/.test(code))
    return `Redis's TLS certificate failed verification (${code}); check REDIS_TLS_CA_FILE`;
  if (code === 'ERR_SSL_WRONG_VERSION_NUMBER' || /wrong version number/i.test(message))
    return 'Redis does not speak TLS on that port; check REDIS_URL (rediss:// needs a TLS port)';
  return null;
}

async function waitUntilReady(client: RedisClient, timeoutMs: number, allMasters = false): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  // Without a listener ioredis prints "Unhandled error event" with a stack; keep the cause for the one-line message.
  let lastError: Error | null = null;
  let refuse: (reason: Error) => void = () => {};
  const refused = new Promise<never>((_, reject) => {
    refuse = reject;
  });
  const remember = (err: Error) => {
    lastError = err;
    // A wrong password or certificate will not get better by retrying: stop startup at once.
    const line = permanentFailure(err);
    if (line) refuse(new Error(line));
  };
  client.on('error', remember);
  try {
    await Promise.race([
      client.connect().then(() => (allMasters && client instanceof Cluster ? connectMasters(client) : undefined)),
      refused,
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`Redis did not answer within ${timeoutMs} ms`)), timeoutMs);
      }),
    ]);
  } catch (err) {
    client.disconnect();
    const line = permanentFailure(err as Error) ?? (lastError ? permanentFailure(lastError) : null);
    if (line) throw new Error(line, { cause: err });
    if ((err as Error).message && refusedLine(err as Error)) throw err;
    const cause = (lastError as NodeJS.ErrnoException | null)?.code ?? (lastError ?? (err as Error)).message;
    throw new Error(`Redis is unreachable (${cause}); check REDIS_URL, REDIS_CLUSTER_NODES or REDIS_SENTINELS`, {
      cause: err,
    });
  } finally {
    clearTimeout(timer);
    client.off('error', remember);
  }
}

/** permanentFailure's line for a TLS handshake with `node`, or null when it succeeds or fails otherwise. */
function tlsHandshakeFailure(node: string, options: ConnectionOptions, timeoutMs = 2000): Promise<string | null> {
  const { host, port } = hostAndPort(node);
  return new Promise((resolve) => {
    const socket = tls.connect({ ...options, host, port, timeout: timeoutMs });
    const done = (line: string | null) => {
      socket.destroy();
      resolve(line);
    };
    socket.once('secureConnect', () => done(null));
    socket.once('timeout', () => done(null));
    socket.once('error', (err) => done(permanentFailure(err)));
  });
}

/** Whether `err` is already one of permanentFailure's lines. */
function refusedLine(err: Error): boolean {
  return /^(Redis refused|Redis needs|the Redis user|Redis's TLS|Redis does not speak|Redis requires)/.test(
    err.message,
  );
}
