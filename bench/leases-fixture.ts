import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import Redis from 'ioredis';
import { freePort } from '../test/support/redis-server';
import { ADMIN_TOKEN } from './external';
import { processCpuMs, treeCpuMs } from './processes';

/**
 * What `--leases` (bench/leases.ts) starts and reads: the gateway as `npm start` runs it (a
 * supervisor and its workers, dist/main.js of `gatewayRoot`) on one Redis or on a Cluster, with
 * the leases switch set in a CONFIG_FILE, and the Redis nodes' own accounts (INFO commandstats,
 * INFO stats, INFO cpu, and the redis-server processes' CPU from /proc).
 */

/** Where the gateway finds Redis: one server, or a Cluster's masters. */
export type RedisTarget = { url: string } | { clusterNodes: string[] };

export interface LeasesGateway {
  name: string;
  url: string;
  adminUrl: string;
  /** CPU of the supervisor and every worker, from /proc, in ms. */
  cpuMs(): number;
  /** An enterprise key with these limits, made through the admin API; returns the key itself. */
  createKey(limits: { perMinute: number; perDay: number }): Promise<string>;
  /** The gateway's lease metrics (every `gateway_lease*` sample), summed over labels but `outcome` and `decided_by`. */
  leaseMetrics(): Promise<Record<string, number>>;
  stop(): Promise<void>;
}

async function waitUntilServing(url: string, child: ChildProcess, what: string, timeoutMs = 60_000): Promise<void> {
  const startedAt = Date.now();
  for (;;) {
    if (child.exitCode !== null) throw new Error(`${what} exited (${child.exitCode}) before it served`);
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(1000) });
      await res.arrayBuffer();
      if (res.status === 200) return;
    } catch {
      // not yet listening
    }
    if (Date.now() - startedAt > timeoutMs) throw new Error(`${what} was not ready at ${url} within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/**
 * Sums `gateway_lease…` samples by metric name and its `outcome` or `decided_by` label (workers and
 * other labels added up): `gateway_lease_units:taken`, `gateway_lease_admissions:lease`.
 */
export function parseLeaseMetrics(text: string): Record<string, number> {
  const sums: Record<string, number> = {};
  for (const line of text.split('\n')) {
    const match = /^(gateway_lease\w*?)(?:_total)?(\{[^}]*\})?\s+([\d.eE+-]+)$/.exec(line.trim());
    if (!match) continue;
    const outcome = /(?:outcome|decided_by)="([^"]+)"/.exec(match[2] ?? '')?.[1];
    const name = outcome ? `${match[1]}:${outcome}` : match[1]!;
    sums[name] = (sums[name] ?? 0) + Number(match[3]);
  }
  return sums;
}

/**
 * `npm start`'s gateway from `gatewayRoot` (a checkout with dist/ built), WORKERS as given.
 * `leases`: the value of `rateLimit.leases.enabled` in its CONFIG_FILE (null: no CONFIG_FILE, for a
 * build without the switch).
 */
export async function startLeasesGateway(
  name: string,
  options: {
    gatewayRoot: string;
    workers: number;
    redis: RedisTarget;
    upstreamUrl: string;
    workDir: string;
    leases: boolean | null;
  },
): Promise<LeasesGateway> {
  const dataDir = path.join(options.workDir, name);
  fs.mkdirSync(dataDir, { recursive: true });
  const [port, adminPort] = [await freePort(), await freePort()];
  let configFile: string | null = null;
  if (options.leases !== null) {
    configFile = path.join(dataDir, 'leases.yaml');
    fs.writeFileSync(configFile, `rateLimit:\n  leases:\n    enabled: ${options.leases}\n`);
  }
  const log = fs.openSync(path.join(options.workDir, `${name}.log`), 'a');
  const redisEnv =
    'url' in options.redis
      ? { REDIS_URL: options.redis.url }
      : { REDIS_CLUSTER_NODES: options.redis.clusterNodes.join(',') };
  const child = spawn(process.execPath, [path.join(options.gatewayRoot, 'dist', 'main.js')], {
    env: {
      PATH: process.env.PATH ?? '',
      APP_ENV: 'staging',
      WORKERS: String(options.workers),
      PORT: String(port),
      ADMIN_PORT: String(adminPort),
      INVENTORY_URL: options.upstreamUrl,
      ...redisEnv,
      ADMIN_TOKEN,
      SIGNING_SECRET: 'bench-signing-secret-that-is-long-enough-0123456789',
      DATA_DIR: dataDir,
      LOG_LEVEL: 'info',
      ...(configFile ? { CONFIG_FILE: configFile } : {}),
    },
    stdio: ['ignore', log, 'inherit'],
  });
  fs.closeSync(log);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const adminUrl = `http://127.0.0.1:${adminPort}`;
  await waitUntilServing(`${adminUrl}/readyz`, child, name);
  const pid = child.pid!;
  return {
    name,
    url: `http://127.0.0.1:${port}`,
    adminUrl,
    cpuMs: () => treeCpuMs(pid),
    async createKey(limits) {
      const res = await fetch(`${adminUrl}/admin/keys`, {
        method: 'POST',
        headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'bench leases', plan: 'enterprise', limits }),
      });
      if (res.status !== 201) throw new Error(`${name}: creating a key answered ${res.status}: ${await res.text()}`);
      return ((await res.json()) as { key: string }).key;
    },
    async leaseMetrics() {
      const res = await fetch(`${adminUrl}/metrics`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
      return parseLeaseMetrics(await res.text());
    },
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      const killer = setTimeout(() => child.kill('SIGKILL'), 15_000);
      await exited;
      clearTimeout(killer);
    },
  };
}

/** One reading of every node of a Redis (one server or a Cluster's masters). */
export interface RedisReading {
  /** Calls and µs per command, from INFO commandstats (commands run inside scripts included). */
  commands: Record<string, { calls: number; usec: number }>;
  /** INFO stats total_commands_processed, summed over the nodes. */
  totalCommandsProcessed: number;
  /** INFO cpu used_cpu_user + used_cpu_sys (all of Redis's threads), in ms. */
  usedCpuMs: number;
  /** The redis-server processes' user + system time, from /proc, in ms. */
  processCpuMs: number;
}

/** The bench's reader of one Redis or a Cluster: a plain connection to each node (no cluster client). */
export class RedisNodes {
  private readonly clients: Redis[];
  private pids: number[] = [];

  constructor(
    readonly label: string,
    ports: number[],
  ) {
    this.clients = ports.map((port) => new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: 1 }));
  }

  async read(): Promise<RedisReading> {
    // One INFO per node: its own call shows in cmdstat_info, which is left out of the counts.
    const texts = await Promise.all(this.clients.map((client) => client.info('everything')));
    if (this.pids.length === 0) this.pids = texts.map((text) => Number(/^process_id:(\d+)/m.exec(text)![1]));
    const reading: RedisReading = { commands: {}, totalCommandsProcessed: 0, usedCpuMs: 0, processCpuMs: 0 };
    for (const text of texts) {
      for (const match of text.matchAll(/^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/gm)) {
        const entry = (reading.commands[match[1]!] ??= { calls: 0, usec: 0 });
        entry.calls += Number(match[2]);
        entry.usec += Number(match[3]);
      }
      reading.totalCommandsProcessed += Number(/^total_commands_processed:(\d+)/m.exec(text)?.[1] ?? 0);
      const user = Number(/^used_cpu_user:([\d.]+)/m.exec(text)?.[1] ?? 0);
      const sys = Number(/^used_cpu_sys:([\d.]+)/m.exec(text)?.[1] ?? 0);
      reading.usedCpuMs += (user + sys) * 1000;
    }
    reading.processCpuMs = this.pids.reduce((sum, pid) => sum + processCpuMs(pid), 0);
    return reading;
  }

  close(): void {
    for (const client of this.clients) client.disconnect();
  }
}

/** What a Redis did between two readings, the bench's own INFO calls left out. */
export interface RedisWork {
  /** Commands run, scripts' inner commands included (commandstats), INFO left out. */
  commands: number;
  /** EVALSHA and EVAL calls: one a round trip of the limiter. */
  scriptCalls: number;
  /** Commands received from clients (total_commands_processed), the bench's INFO calls left out. */
  commandsProcessed: number;
  /** µs Redis booked to EVALSHA/EVAL (commandstats usec: a script's inner commands included). */
  scriptUsec: number;
  /**
   * µs Redis booked to every command, INFO left out: an upper bound, since a script's inner
   * commands are booked both to themselves and to the script that ran them.
   */
  commandUsec: number;
  usedCpuMs: number;
  processCpuMs: number;
  /** Calls per command, for the report. */
  byCommand: Record<string, number>;
}

const SCRIPT_COMMANDS = new Set(['evalsha', 'eval', 'evalsha_ro', 'eval_ro', 'fcall', 'fcall_ro']);

export function redisWork(after: RedisReading, before: RedisReading): RedisWork {
  const work: RedisWork = {
    commands: 0,
    scriptCalls: 0,
    commandsProcessed: 0,
    scriptUsec: 0,
    commandUsec: 0,
    usedCpuMs: after.usedCpuMs - before.usedCpuMs,
    processCpuMs: after.processCpuMs - before.processCpuMs,
    byCommand: {},
  };
  let infoCalls = 0;
  for (const [name, stat] of Object.entries(after.commands)) {
    const calls = stat.calls - (before.commands[name]?.calls ?? 0);
    const usec = stat.usec - (before.commands[name]?.usec ?? 0);
    if (name === 'info') {
      infoCalls = calls;
      continue;
    }
    if (calls <= 0) continue;
    work.byCommand[name] = calls;
    work.commands += calls;
    work.commandUsec += usec;
    if (SCRIPT_COMMANDS.has(name)) {
      work.scriptCalls += calls;
      work.scriptUsec += usec;
    }
  }
  work.commandsProcessed = after.totalCommandsProcessed - before.totalCommandsProcessed - infoCalls;
  return work;
}
