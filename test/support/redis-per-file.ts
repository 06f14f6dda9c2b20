import { startRedisServer, type RedisProcess } from './redis-server';
import { atFileEnd } from './file-end';

/** The file's own redis-server: what `startRedisServer` returns, and a stop and start on the same port. */
export interface RedisPerFile extends RedisProcess {
  /** Starts it again on the same port after `stop()`: empty (no persistence), as after a loss. */
  start(): Promise<void>;
  /** `stop()` then `start()`: a Redis restarted empty on the same port. */
  restart(): Promise<void>;
}

/**
 * One plain redis-server of this test file's own on a free loopback port: started by a beforeAll
 * declared where this is called (call it before the file's own beforeAll hooks that use it), and
 * stopped once the file is done, after every afterAll of the file, so that those can still close
 * their clients and products on it. Files that need a Cluster, Sentinel, TLS, an ACL or persistence
 * use the kit's starters (`startRedisCluster`, `startSentinelSetup`, `startRedisServer(args)`).
 * Its figures (`url`, `port`, …) can be read from the beforeAll hooks on.
 */
export function useRedisPerFile(extraArgs: string[] = []): RedisPerFile {
  let current: RedisProcess | null = null;
  let port: number | undefined;
  const running = (): RedisProcess => {
    if (!current) throw new Error('the file’s Redis is not running (read it from a hook or a test, not at load)');
    return current;
  };
  const start = async () => {
    if (current) return;
    current = await startRedisServer(extraArgs, port);
    port = current.port;
  };
  const stop = async () => {
    const stopping = current;
    current = null;
    await stopping?.stop();
  };
  beforeAll(start);
  atFileEnd(stop);
  return {
    get url() {
      return running().url;
    },
    get port() {
      return port ?? running().port;
    },
    get pid() {
      return running().pid;
    },
    get dir() {
      return running().dir;
    },
    start,
    stop,
    async restart() {
      await stop();
      await start();
    },
  };
}
