import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Redis from 'ioredis';
import { assertRedisServerAvailable, freePort, startRedisServer, type RedisProcess } from './redis-server';

export interface SentinelSetup {
  primary: RedisProcess;
  replica: RedisProcess;
  /** host:port of each sentinel, as REDIS_SENTINELS takes them. */
  sentinels: string[];
  name: string;
  /** host:port of the primary the sentinels name now. */
  currentPrimary(): Promise<string>;
  stop(): Promise<void>;
}

/**
 * One primary, one replica and three sentinels (`redis-server --sentinel`, the same binary) on
 * loopback, with a quorum of 2 and a 1 s down-after: a killed primary is replaced in a few seconds.
 */
export async function startSentinelSetup(name = 'mymaster'): Promise<SentinelSetup> {
  assertRedisServerAvailable();
  const primary = await startRedisServer();
  const replica = await startRedisServer(['--replicaof', '127.0.0.1', String(primary.port)]);
  const children: ChildProcess[] = [];
  const sentinels: string[] = [];
  for (let i = 0; i < 3; i++) {
    const port = await freePort();
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'asg-sentinel-'));
    const conf = path.join(dir, 'sentinel.conf');
    fs.writeFileSync(
      conf,
      [
        `port ${port}`,
        'bind 127.0.0.1',
        `dir ${dir}`,
        `sentinel monitor ${name} 127.0.0.1 ${primary.port} 2`,
        `sentinel down-after-milliseconds ${name} 1000`,
        `sentinel failover-timeout ${name} 5000`,
        `sentinel parallel-syncs ${name} 1`,
        '',
      ].join('\n'),
    );
    children.push(spawn('redis-server', [conf, '--sentinel'], { stdio: 'ignore' }));
    sentinels.push(`127.0.0.1:${port}`);
  }
  const ask = async (sentinel: string): Promise<string | null> => {
    const [host, port] = sentinel.split(':');
    const client = new Redis(Number(port), host!, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
    client.on('error', () => {});
    try {
      await client.connect();
      const answer = (await client.call('SENTINEL', 'get-master-addr-by-name', name)) as [string, string] | null;
      return answer ? `${answer[0]}:${answer[1]}` : null;
    } catch {
      return null;
    } finally {
      client.disconnect();
    }
  };
  // Every sentinel up and knowing the primary, and the replica in sync, before a test relies on them.
  const deadline = Date.now() + 15_000;
  for (;;) {
    const answers = await Promise.all(sentinels.map(ask));
    const replicaInfo = await replicaLinkUp(replica.port);
    if (answers.every((a) => a === `127.0.0.1:${primary.port}`) && replicaInfo) break;
    if (Date.now() > deadline) throw new Error(`sentinels did not come up: ${JSON.stringify(answers)}, replica link up: ${replicaInfo}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    primary,
    replica,
    sentinels,
    name,
    async currentPrimary() {
      for (const sentinel of sentinels) {
        const answer = await ask(sentinel);
        if (answer) return answer;
      }
      throw new Error('no sentinel answered');
    },
    async stop() {
      for (const child of children) child.kill('SIGKILL');
      await Promise.all([primary.stop(), replica.stop()]);
    },
  };
}

async function replicaLinkUp(port: number): Promise<boolean> {
  const client = new Redis(port, '127.0.0.1', { maxRetriesPerRequest: 0 });
  try {
    return /master_link_status:up/.test(await client.info('replication'));
  } finally {
    client.disconnect();
  }
}
