import Redis, { Cluster, type RedisOptions } from 'ioredis';

/** A single Redis or a Redis Cluster; everything above this module talks to either alike. */
export type RedisClient = Redis | Cluster;

export interface RedisSettings {
  url: string | null;
  clusterNodes: string[];
  commandTimeoutMs: number;
  /** Overrides nothing: config refuses a password in both REDIS_URL and REDIS_PASSWORD. */
  password?: string | null;
}

export function redisConfigured(settings: RedisSettings): boolean {
  return settings.url !== null || settings.clusterNodes.length > 0;
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
    // Commands issued in one turn of the event loop (the limiter calls of requests that arrived
    // together) go out in one write: under load that halves the gateway's system calls to Redis,
    // and each request still makes its one round trip.
    enableAutoPipelining: true,
    ...(settings.password ? { password: settings.password } : {}),
  };
}

/**
 * Creates and connects a client; rejects if Redis does not answer within `connectTimeoutMs`. On a
 * Cluster that includes a connection to every master, so no request pays for one.
 */
export async function connectRedis(settings: RedisSettings, connectTimeoutMs = 5000): Promise<RedisClient> {
  const client = createRedisClient(settings);
  await waitUntilReady(client, connectTimeoutMs, true);
  return client;
}

export function createRedisClient(settings: RedisSettings): RedisClient {
  if (settings.clusterNodes.length > 0) {
    const nodes = settings.clusterNodes.map((node) => {
      const [host, port] = node.split(':');
      return { host: host!, port: Number(port) };
    });
    return new Cluster(nodes, {
      // No auto-pipelining on a Cluster: under concurrent traffic ioredis 6's Cluster auto-pipeline
      // lost scripts defined meanwhile ("pipeline[functionName] is not a function") and failed
      // whole batches ("results[i] is not iterable") in our cluster suite.
      redisOptions: { ...baseOptions(settings), enableAutoPipelining: false },
      enableOfflineQueue: false,
      lazyConnect: true,
      enableAutoPipelining: false,
      clusterRetryStrategy: (attempt) => Math.min(100 * attempt, 1000),
    });
  }
  if (!settings.url) throw new Error('createRedisClient needs a url or cluster nodes');
  return new Redis(settings.url, baseOptions(settings));
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
  return subscriber;
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

async function waitUntilReady(client: RedisClient, timeoutMs: number, allMasters = false): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  // Without a listener ioredis prints "Unhandled error event" with a stack; keep the cause for the one-line message.
  let lastError: Error | null = null;
  const remember = (err: Error) => {
    lastError = err;
  };
  client.on('error', remember);
  try {
    await Promise.race([
      client.connect().then(() => (allMasters && client instanceof Cluster ? connectMasters(client) : undefined)),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`Redis did not answer within ${timeoutMs} ms`)), timeoutMs);
      }),
    ]);
  } catch (err) {
    client.disconnect();
    const cause = (lastError as NodeJS.ErrnoException | null)?.code ?? (lastError ?? (err as Error)).message;
    throw new Error(`Redis is unreachable (${cause}); check REDIS_URL or REDIS_CLUSTER_NODES`);
  } finally {
    clearTimeout(timer);
    client.off('error', remember);
  }
}
