import { startRedisServer } from './redis-server';

// One private redis-server for the whole run unless REDIS_URL names one; suites isolate themselves
// by key namespace. The shared Redis on 6379 is never used or flushed.
export default async function globalSetup(): Promise<void> {
  // The CI log runs the suite on two Nodes; this line says which one this run is.
  process.stdout.write(`\ntest run on Node ${process.version} (${process.execPath})\n`);
  if (process.env.REDIS_URL) {
    process.env.TEST_REDIS_URL = process.env.REDIS_URL;
    return;
  }
  const redis = await startRedisServer();
  process.env.TEST_REDIS_URL = redis.url;
  (globalThis as { __testRedis?: typeof redis }).__testRedis = redis;
}
