import type { RedisProcess } from '../test/support/redis-server';
import type { BenchChild } from './processes';
import type { RedisCommandStats } from './redis-stats';

/**
 * What every mode needs: a private Redis, the fixed upstream, and a way to start gateways. Made by
 * bench/main.ts (withFixture) and used by the modes (bench/instructions.ts): a module of its own,
 * so that no mode imports main.ts back.
 */
export interface Fixture {
  redis: RedisProcess;
  redisStats: RedisCommandStats;
  upstream: BenchChild;
  spawn(
    name: string,
    script: string,
    options: object,
    logFile?: string,
    nodeFlags?: string[],
    benchDir?: string,
    launcher?: string[],
  ): Promise<BenchChild>;
  gateway(
    name: string,
    forwarder: 'undici' | 'http-proxy',
    withRedis: boolean,
    options?: {
      banThreshold?: number;
      minuteWindow?: 'fixed' | 'sliding';
      nodeFlags?: string[];
      tracing?: { sinkUrl: string; ratio: number };
      extraKeys?: number;
      benchDir?: string;
      monthAndCost?: boolean;
      allowlist100?: boolean;
      consumerKeys?: number;
      admittedInConsumer?: boolean;
      maxInFlight?: number;
      launcher?: string[];
      underValgrind?: boolean;
    },
  ): Promise<BenchChild>;
  children: BenchChild[];
  workDir: string;
}
