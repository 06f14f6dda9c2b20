import Redis, { Cluster, type RedisOptions } from 'ioredis';

/** A single Redis or a Redis Cluster; everything above this module talks to either alike. */
export type RedisClient = Redis | Cluster;

export interface RedisSettings {
  url: string | null;
  clusterNodes: string[];
  commandTimeoutMs: number;
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
  };
}

/** Creates and connects a client; rejects if Redis does not answer within `connectTimeoutMs`. */
export async function connectRedis(settings: RedisSettings, connectTimeoutMs = 5000): Promise<RedisClient> {
  const client = createRedisClient(settings);
  await waitUntilReady(client, connectTimeoutMs);
  return client;
}

export function createRedisClient(settings: RedisSettings): RedisClient {
  if (settings.clusterNodes.length > 0) {
    const nodes = settings.clusterNodes.map((node) => {
      const [host, port] = node.split(':');
      return { host: host!, port: Number(port) };
    });
    return new Cluster(nodes, {
      redisOptions: baseOptions(settings),
      enableOfflineQueue: false,
      lazyConnect: true,
      clusterRetryStrategy: (attempt) => Math.min(100 * attempt, 1000),
    });
  }
  if (!settings.url) throw new Error('createRedisClient needs a url or cluster nodes');
  return new Redis(settings.url, baseOptions(settings));
}

/** A second connection for SUBSCRIBE, which cannot share a connection with other commands. */
export async function duplicateForSubscribe(client: RedisClient, connectTimeoutMs = 5000): Promise<RedisClient> {
  const subscriber = client.duplicate();
  await waitUntilReady(subscriber, connectTimeoutMs);
  return subscriber;
}

async function waitUntilReady(client: RedisClient, timeoutMs: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  // Without a listener ioredis prints "Unhandled error event" with a stack; keep the cause for the one-line message.
  let lastError: Error | null = null;
  const remember = (err: Error) => {
    lastError = err;
  };
  client.on('error', remember);
  try {
    await Promise.race([
      client.connect(),
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
