import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Redis from 'ioredis';
import {
  assertRedisServerAvailable,
  exitedAtStart,
  freePort,
  RedisPortTakenError,
  spawnLoggedRedis,
  startRedisServer,
  type RedisProcess,
} from './redis-server';
import { redisTlsArgs, type TestCertificates } from './tls-certs';
import { eventually } from './eventually';

export interface SentinelSetup {
  primary: RedisProcess;
  replica: RedisProcess;
  /** host:port of each sentinel, as REDIS_SENTINELS takes them (their TLS ports with `tls`). */
  sentinels: string[];
  name: string;
  /** host:port of the primary the sentinels name now. */
  currentPrimary(): Promise<string>;
  stop(): Promise<void>;
}

/**
 * One primary, one replica and three sentinels (`redis-server --sentinel`, the same binary) on
 * loopback, with a quorum of 2 and a 1 s down-after: a killed primary is replaced in a few seconds.
 * With `tls`, every process also listens with TLS (no client certificate required), replication
 * and the sentinels' links to the data nodes go over TLS, and the sentinels name the data nodes by
 * their TLS ports; the plain ports stay for the test's own looks inside.
 */
export async function startSentinelSetup(
  name = 'mymaster',
  options: { tls?: TestCertificates } = {},
): Promise<SentinelSetup> {
  assertRedisServerAvailable();
  const tlsArgs = async () =>
    options.tls
      ? [...redisTlsArgs(options.tls, await freePort(), { requireClientCert: false }), '--tls-replication', 'yes']
      : [];
  const primaryTls = await tlsArgs();
  const primary = await startRedisServer(primaryTls);
  const primaryPort = options.tls ? Number(primaryTls[1]) : primary.port;
  const replica = await startRedisServer(['--replicaof', '127.0.0.1', String(primaryPort), ...(await tlsArgs())]);
  const launch = () => launchSentinel(name, primaryPort, options.tls);
  const sentinelProcesses = await Promise.all([launch(), launch(), launch()]);
  const plainSentinels = () => sentinelProcesses.map((sentinel) => `127.0.0.1:${sentinel.port}`);
  const ask = async (sentinel: string): Promise<string | null> => {
    const [host, port] = sentinel.split(':');
    const client = new Redis(Number(port), host!, {
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
    });
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
  // Redis's own timing: a hang guard (docs/testing.md), 15 s before, which a crowded machine can outlast.
  let answers: Array<string | null> = [];
  let replicaInfo = false;
  let portRedraws = 0;
  await eventually(
    async () => {
      // A sentinel whose port another worker took between draw and listen has exited: draw again.
      for (const [i, sentinel] of sentinelProcesses.entries()) {
        const failure = exitedAtStart(sentinel.child, sentinel.logPath, `a sentinel on port ${sentinel.port}`);
        if (!failure) continue;
        if (!(failure instanceof RedisPortTakenError) || ++portRedraws > 3) throw failure;
        sentinelProcesses[i] = await launch();
      }
      answers = await Promise.all(plainSentinels().map(ask));
      replicaInfo = await replicaLinkUp(replica.port);
      return answers.every((a) => a === `127.0.0.1:${primaryPort}`) && replicaInfo;
    },
    {
      timeoutMs: 120_000,
      pollMs: 100,
      what: () => `sentinels up (${JSON.stringify(answers)}) and the replica's link up (${replicaInfo})`,
    },
  );
  return {
    primary,
    replica,
    sentinels: sentinelProcesses.map((sentinel) => `127.0.0.1:${sentinel.tlsPort ?? sentinel.port}`),
    name,
    async currentPrimary() {
      for (const sentinel of plainSentinels()) {
        const answer = await ask(sentinel);
        if (answer) return answer;
      }
      throw new Error('no sentinel answered');
    },
    async stop() {
      for (const sentinel of sentinelProcesses) sentinel.child.kill('SIGKILL');
      await Promise.all([primary.stop(), replica.stop()]);
    },
  };
}

interface SentinelProcess {
  child: ChildProcess;
  port: number;
  tlsPort: number | null;
  /** Where it logs: why it exited, when it did. */
  logPath: string;
}

/** One `redis-server --sentinel` on drawn ports, monitoring the primary under `name`. */
async function launchSentinel(
  name: string,
  primaryPort: number,
  tls: TestCertificates | undefined,
): Promise<SentinelProcess> {
  const port = await freePort();
  const tlsPort = tls ? await freePort() : null;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'asg-sentinel-'));
  const conf = path.join(dir, 'sentinel.conf');
  fs.writeFileSync(
    conf,
    [
      `port ${port}`,
      'bind 127.0.0.1',
      `dir ${dir}`,
      ...(tls
        ? [
            `tls-port ${tlsPort}`,
            `tls-cert-file ${tls.serverCert}`,
            `tls-key-file ${tls.serverKey}`,
            `tls-ca-cert-file ${tls.caCert}`,
            'tls-auth-clients no',
            'tls-replication yes',
          ]
        : []),
      `sentinel monitor ${name} 127.0.0.1 ${primaryPort} 2`,
      `sentinel down-after-milliseconds ${name} 1000`,
      `sentinel failover-timeout ${name} 5000`,
      `sentinel parallel-syncs ${name} 1`,
      '',
    ].join('\n'),
  );
  const logPath = path.join(dir, 'sentinel.log');
  return { child: spawnLoggedRedis([conf, '--sentinel'], logPath), port, tlsPort, logPath };
}

async function replicaLinkUp(port: number): Promise<boolean> {
  const client = new Redis(port, '127.0.0.1', { maxRetriesPerRequest: 0 });
  try {
    return /master_link_status:up/.test(await client.info('replication'));
  } finally {
    client.disconnect();
  }
}
