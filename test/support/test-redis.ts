import { randomBytes } from 'node:crypto';

/** The Redis the global setup started (or REDIS_URL); fails loudly when neither exists. */
export function testRedisUrl(): string {
  const url = process.env.TEST_REDIS_URL;
  if (!url) throw new Error('TEST_REDIS_URL is not set: the jest global setup did not start redis-server');
  return url;
}

/** A namespace no other test uses, so suites can share one Redis without flushing it. */
export function uniqueNamespace(label: string): string {
  return `t-${label}-${randomBytes(4).toString('hex')}`;
}
