import { connectRedis, duplicateForSubscribe, type RedisClient } from '../../../src/shared/redis/redis';
import { useRedisPerFile } from '../../support/redis-per-file';

/**
 * ioredis subscribes a subscriber's channels again by itself on reconnect and drops the promise
 * (event_handler.js readyHandler: `self.subscribe(channels)`). When the connection is closed again
 * at that moment the rejection ("Stream isn't writeable", the offline queue being off) was
 * unhandled, which ends a Node process: a CI run met it behind Sentinel while a primary was killed.
 * A subscriber from duplicateForSubscribe marks each subscribe's promise handled; a caller that
 * awaits one still gets its rejection. Here the closed connection is made by hand, on this file's
 * own redis-server, and the call is made as ioredis makes it.
 */
const redis = useRedisPerFile();
let client: RedisClient;
const unhandled: unknown[] = [];
const onUnhandled = (reason: unknown) => unhandled.push(reason);

beforeAll(async () => {
  client = await connectRedis({ url: redis.url, clusterNodes: [], commandTimeoutMs: 2000 });
  process.on('unhandledRejection', onUnhandled);
});

afterAll(async () => {
  process.off('unhandledRejection', onUnhandled);
  client?.disconnect();
});

const settled = () => new Promise((resolve) => setTimeout(resolve, 50));

test.each(['subscribe', 'psubscribe', 'ssubscribe'] as const)(
  'a %s whose promise nobody holds, on a closed connection, is no unhandled rejection; an awaited one still rejects',
  async (method) => {
    const subscriber = await duplicateForSubscribe(client);
    try {
      const call = (channel: string) => (subscriber[method] as (c: string) => Promise<unknown>)(channel);
      // The socket closes under a connection ioredis still takes for ready (its close event comes
      // on a later tick): what the ready handler's resubscribe meets in the race.
      const socket = (subscriber as unknown as { stream: { destroy(): void } }).stream;
      socket.destroy();
      void call('asg-test-dropped'); // as ioredis's own resubscribe does: nobody awaits it
      const awaited = call('asg-test-awaited');
      await expect(awaited).rejects.toThrow("Stream isn't writeable");
      await settled();
      expect(unhandled).toEqual([]);
    } finally {
      subscriber.disconnect();
    }
  },
);
