import fs from 'node:fs';
import Redis from 'ioredis';
import { exportLine } from '../src/keys/key-export';
import { generateApiKey, generateKeyId, hashApiKey } from '../src/keys/key-format';
import { treeBytes, type BenchChild } from './processes';
import { ADMIN_TOKEN } from './external';

/**
 * `npm run bench -- --key-backup [--keys N]`: issue 42's backup path at scale on Redis, with the
 * default command timeout (200 ms): a gateway (`npm start`, dist/main.js) imports N records
 * (100,000 by default), lists and exports them, while one client sends GET /v1/usage back to back
 * and another PINGs Redis. Each phase: its time, the concurrent request's latency (p50, p99, max),
 * its failures, the longest PING (how long Redis was held), the gateway's RSS after it.
 * Writes bench/results/key-backup.json.
 */

export interface KeyBackupSettings {
  keys: number;
}

interface Probe {
  latencies: number[];
  failures: string[];
  pingMaxMs: number;
}

interface PhaseFigures {
  phase: string;
  ms: number;
  status: number;
  detail: string;
  concurrentRequests: number;
  concurrentP50Ms: number;
  concurrentP99Ms: number;
  concurrentMaxMs: number;
  concurrentFailures: number;
  redisPingMaxMs: number;
  gatewayRssMb: number;
}

/** config/staging.yaml's keys.prefix: the bench gateway runs as APP_ENV=staging. */
const PREFIX = 'asg_test_';

function percentile(sorted: number[], p: number): number {
  return sorted.length === 0 ? 0 : sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

/** A backup of `count` records as the export writes them (about 450 bytes a line). */
function backup(count: number): string {
  const at = new Date().toISOString();
  const lines: string[] = [];
  for (let i = 0; i < count; i++) {
    const record = {
      id: generateKeyId(),
      name: `bench backup ${i}`,
      plan: 'free',
      limits: null,
      hash: hashApiKey(generateApiKey(PREFIX)),
      createdAt: at,
      updatedAt: at,
      revokedAt: null,
      expiresAt: null,
      previousHash: null,
      previousKeyExpiresAt: null,
    };
    lines.push(exportLine(record, PREFIX));
  }
  return lines.join('\n') + '\n';
}

/** GET /v1/usage back to back and PING Redis every 5 ms until `done` settles. */
async function probe(gateway: BenchChild, redis: Redis, done: Promise<unknown>): Promise<Probe> {
  let finished = false;
  void done.finally(() => (finished = true)).catch(() => {});
  const result: Probe = { latencies: [], failures: [], pingMaxMs: 0 };
  const requests = (async () => {
    while (!finished) {
      const began = performance.now();
      try {
        const res = await fetch(`${gateway.url}/v1/usage`, {
          headers: { authorization: `Bearer ${gateway.details.admitted}` },
        });
        await res.arrayBuffer();
        if (res.status !== 200) result.failures.push(String(res.status));
      } catch (err) {
        result.failures.push((err as Error).message);
      }
      result.latencies.push(performance.now() - began);
    }
  })();
  const pings = (async () => {
    while (!finished) {
      const began = performance.now();
      await redis.ping();
      result.pingMaxMs = Math.max(result.pingMaxMs, performance.now() - began);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  })();
  await Promise.all([requests, pings]);
  return result;
}

async function phase(
  name: string,
  gateway: BenchChild,
  redis: Redis,
  run: () => Promise<{ status: number; detail: string }>,
): Promise<PhaseFigures> {
  const began = performance.now();
  const running = run();
  const [outcome, seen] = await Promise.all([running, probe(gateway, redis, running)]);
  const ms = performance.now() - began;
  const sorted = [...seen.latencies].sort((a, b) => a - b);
  const figures = {
    phase: name,
    ms: Math.round(ms),
    ...outcome,
    concurrentRequests: sorted.length,
    concurrentP50Ms: +percentile(sorted, 50).toFixed(1),
    concurrentP99Ms: +percentile(sorted, 99).toFixed(1),
    concurrentMaxMs: +(sorted.at(-1) ?? 0).toFixed(1),
    concurrentFailures: seen.failures.length,
    redisPingMaxMs: +seen.pingMaxMs.toFixed(1),
    gatewayRssMb: Math.round(treeBytes(gateway.pid, 'VmRSS') / 1e6),
  };
  process.stdout.write(`${JSON.stringify(figures)}\n`);
  return figures;
}

export async function benchKeyBackup(
  settings: KeyBackupSettings,
  gateway: BenchChild,
  redisUrl: string,
  resultFile: string,
): Promise<void> {
  const adminUrl = gateway.details.adminUrl!;
  const auth = { authorization: `Bearer ${ADMIN_TOKEN}` };
  const redis = new Redis(redisUrl);
  const body = backup(settings.keys);
  process.stdout.write(
    `key backup: ${settings.keys} records (${(body.length / 1e6).toFixed(1)} MB) into a gateway on Redis, default command timeout\n`,
  );
  try {
    const phases = [
      await phase('import', gateway, redis, async () => {
        const res = await fetch(`${adminUrl}/admin/keys/import`, {
          method: 'POST',
          headers: { ...auth, 'content-type': 'application/x-ndjson' },
          body,
        });
        return { status: res.status, detail: await res.text() };
      }),
      await phase('import again (all unchanged)', gateway, redis, async () => {
        const res = await fetch(`${adminUrl}/admin/keys/import`, {
          method: 'POST',
          headers: { ...auth, 'content-type': 'application/x-ndjson' },
          body,
        });
        return { status: res.status, detail: await res.text() };
      }),
      await phase('export', gateway, redis, async () => {
        const res = await fetch(`${adminUrl}/admin/keys/export`, { headers: auth });
        const text = await res.text();
        return {
          status: res.status,
          detail: `${text.split('\n').length - 1} lines, ${(text.length / 1e6).toFixed(1)} MB`,
        };
      }),
      await phase('GET /admin/keys', gateway, redis, async () => {
        const res = await fetch(`${adminUrl}/admin/keys`, { headers: auth });
        const list = res.status === 200 ? ((await res.json()) as unknown[]) : [];
        return { status: res.status, detail: `${list.length} keys` };
      }),
    ];
    const result = {
      keys: settings.keys,
      bodyBytes: body.length,
      gatewayPeakRssMb: Math.round(treeBytes(gateway.pid, 'VmHWM') / 1e6),
      phases,
    };
    fs.writeFileSync(resultFile, JSON.stringify(result, null, 2) + '\n');
    process.stdout.write(`wrote ${resultFile}\n`);
  } finally {
    redis.disconnect();
  }
}
