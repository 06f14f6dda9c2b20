/** Where the shared store is: a server (REDIS_URL), a Cluster or Sentinel; at most one may be set. */
export interface RedisSources {
  url: string | null;
  clusterNodes: readonly string[];
  sentinels?: readonly string[];
}

export function redisSourceCount(redis: RedisSources): number {
  return [redis.url !== null, redis.clusterNodes.length > 0, (redis.sentinels?.length ?? 0) > 0].filter(Boolean).length;
}

/** The one answer to "is Redis configured": the config's checks, the stores starter and the Redis client all ask here. */
export function redisConfigured(redis: RedisSources): boolean {
  return redisSourceCount(redis) > 0;
}
