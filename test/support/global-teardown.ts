import type { RedisProcess } from './redis-server';

export default async function globalTeardown(): Promise<void> {
  const redis = (globalThis as { __testRedis?: RedisProcess }).__testRedis;
  if (redis) await redis.stop();
}
