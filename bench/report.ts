import fs from 'node:fs';
import path from 'node:path';

export interface RedisFigures {
  /** Every command Redis ran (INFO commandstats), those inside the limiter's Lua script included. */
  commandsPerRequest: number;
  /** Commands the gateway sent (each one a request and a reply); null where it cannot count them (several processes). */
  roundTripsPerRequest: number | null;
  /** HGET on the key store: a key lookup that missed the in-process cache. */
  keyLookupsPerRequest: number;
  byCommand: Record<string, number>;
}

export interface VariantSummary {
  id: string;
  label: string;
  requestsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  ratioToBaseline: number;
  /** Requests/s against nginx with one worker, when nginx ran. */
  ratioToNginx: number | null;
  rounds: Array<{ requestsPerSecond: number; p50Ms: number; p99Ms: number; requests: number }>;
  requests: number;
  /** CPU time of the server under test per request (user + system), in µs; 10 ms tick resolution over the whole run. */
  serverCpuMicrosPerRequest: number;
  redisCpuMicrosPerRequest: number | null;
  expectedStatus: number;
  unexpectedResponses: number;
  redis: RedisFigures | null;
}

export interface RssFigures {
  startMiB: number;
  endMiB: number;
  peakMiB: number;
}

export interface BenchReport {
  startedAt: string;
  finishedAt: string;
  settings: { rounds: number; durationSeconds: number; warmupSeconds: number; connections: number; quick: boolean; client: 'wrk' | 'autocannon' };
  machine: { nproc: number; cpuModel: string; memoryGiB: number; node: string; platform: string };
  loadAverage: { before: number[]; after: number[] };
  baseline: string;
  variants: VariantSummary[];
  rss: Record<string, RssFigures>;
  /** The last `--soak` run (bench/results/soak.json), if there was one. */
  soak: (RssFigures & { requests: number; growthPercent: number; requestsPerSecond: number; finishedAt: string }) | null;
}

interface TargetCheck {
  target: string;
  holds: boolean;
  figures: string;
}

const f0 = (n: number) => n.toFixed(0);
const f1 = (n: number) => n.toFixed(1);
const f2 = (n: number) => n.toFixed(2);

/** One row's CPU per request against another's, as a target: `ratio` at most `limit`. */
function cpuRatio(target: string, row: VariantSummary, reference: VariantSummary, limit: number): TargetCheck {
  const ratio = row.serverCpuMicrosPerRequest / reference.serverCpuMicrosPerRequest;
  return { target, holds: ratio <= limit, figures: `${f2(ratio)}× (${f1(row.serverCpuMicrosPerRequest)} vs ${f1(reference.serverCpuMicrosPerRequest)} µs CPU per request)` };
}

/**
 * The targets (issue 27: CPU per request, which holds from run to run where req/s measures the
 * shared machine), judged on this run's figures.
 */
export function checkTargets(report: BenchReport): TargetCheck[] {
  const byId = new Map(report.variants.map((v) => [v.id, v]));
  const checks: TargetCheck[] = [];
  const gateway = byId.get('gateway-redis-undici');
  const gateway2 = byId.get('gateway-redis-undici-2-workers');
  const peer = byId.get('fastify-peer');
  const manyKeys = byId.get('gateway-redis-undici-1000-keys');
  if (gateway && peer) checks.push(cpuRatio('gateway (Redis, undici, every feature on) ≤ 0.90× the fastify peer, CPU per request', gateway, peer, 0.9));
  if (gateway && manyKeys) checks.push(cpuRatio(`${manyKeys.label} within 10 % of one key, CPU per request`, manyKeys, gateway, 1.1));
  if (gateway && gateway2) checks.push(cpuRatio('WORKERS=2 (supervisor included) within 10 % of one worker, CPU per request', gateway2, gateway, 1.1));
  if (gateway?.redisCpuMicrosPerRequest != null && peer?.redisCpuMicrosPerRequest != null) {
    checks.push({
      target: 'Redis CPU per admitted request: the gateway against the fastify peer (information)',
      holds: true,
      figures: `${f1(gateway.redisCpuMicrosPerRequest)} vs ${f1(peer.redisCpuMicrosPerRequest)} µs`,
    });
  }
  for (const v of [gateway, manyKeys, gateway2, peer]) {
    if (!v?.redis) continue;
    if (v.redis.roundTripsPerRequest !== null) {
      checks.push({ target: `${v.label}: ≤ 1 Redis round trip per admitted request`, holds: v.redis.roundTripsPerRequest <= ROUND_TRIP_TOLERANCE, figures: f2(v.redis.roundTripsPerRequest) });
    }
    if (v === peer) continue;
    checks.push({
      target: `${v.label}: no key lookup on a cache hit`,
      // A cached key is looked up again once per keys.cacheTtlSeconds; nothing per request.
      holds: v.redis.keyLookupsPerRequest < 0.001,
      figures: `${Math.round(v.redis.keyLookupsPerRequest * v.requests)} HGET in ${v.requests} requests`,
    });
  }
  for (const id of ['refused-429-limited', 'refused-429-banned']) {
    const refused = byId.get(id);
    if (!refused || !gateway) continue;
    checks.push({
      target: `${refused.label} cheaper than an admitted request`,
      holds: refused.serverCpuMicrosPerRequest < gateway.serverCpuMicrosPerRequest,
      figures: `${f0(refused.serverCpuMicrosPerRequest)} vs ${f0(gateway.serverCpuMicrosPerRequest)} µs CPU per request`,
    });
  }
  if (report.soak) {
    const s = report.soak;
    checks.push({
      target: `RSS flat (< 10 % growth) over ${s.requests} requests (soak run ${s.finishedAt})`,
      holds: s.growthPercent < 10,
      figures: `${f0(s.startMiB)} → ${f0(s.endMiB)} MiB (${f2(s.growthPercent)} %), peak ${f0(s.peakMiB)} MiB`,
    });
  }
  return checks;
}

function resultRows(report: BenchReport): string[][] {
  return report.variants.map((v) => [
    v.label,
    f0(v.requestsPerSecond),
    f2(v.p50Ms),
    f2(v.p99Ms),
    `${f2(v.ratioToBaseline)}×`,
    v.ratioToNginx === null ? '–' : f2(v.ratioToNginx),
    f1(v.serverCpuMicrosPerRequest),
    v.redisCpuMicrosPerRequest === null ? '–' : f1(v.redisCpuMicrosPerRequest),
    v.redis ? f2(v.redis.commandsPerRequest) : '–',
    v.redis?.roundTripsPerRequest != null ? f2(v.redis.roundTripsPerRequest) : '–',
    v.unexpectedResponses === 0 ? `all ${v.expectedStatus}` : `${v.unexpectedResponses} not ${v.expectedStatus}`,
  ]);
}

/**
 * wrk does not count the requests still in flight when a run ends (up to one per connection per
 * round: 50 × 3 of some 150,000), while Redis saw their commands; so a count of exactly one round
 * trip per request reads as up to about 1.001.
 */
const ROUND_TRIP_TOLERANCE = 1.002;

const HEADER = ['variant', 'req/s', 'p50 ms', 'p99 ms', 'vs baseline', 'vs nginx', 'server CPU µs/req', 'Redis CPU µs/req', 'Redis cmds/req', 'round trips/req', 'responses'];

export function markdownTable(header: string[], rows: string[][]): string {
  const line = (cells: string[]) => `| ${cells.join(' | ')} |`;
  return [line(header), line(header.map((_, i) => (i === 0 ? '---' : '---:'))), ...rows.map(line)].join('\n');
}

function commandBreakdown(report: BenchReport): string {
  return report.variants
    .filter((v) => v.redis)
    .map((v) => `- ${v.label}: ${Object.entries(v.redis!.byCommand).map(([name, n]) => `${name} ${n.toFixed(3)}`).join(', ') || 'none'}`)
    .join('\n');
}

export function markdown(report: BenchReport): string {
  const m = report.machine;
  const rss = Object.entries(report.rss).map(([name, r]) => [name, f0(r.startMiB), f0(r.endMiB), f0(r.peakMiB)]);
  const targets = checkTargets(report).map((t) => [t.target, t.holds ? 'holds' : 'missed', t.figures]);
  return [
    `Run ${report.startedAt} on ${m.nproc} cores (${m.cpuModel}), ${m.memoryGiB} GiB, Node ${m.node}, ${m.platform}. ` +
      `${report.settings.rounds} round(s), ${report.settings.client}, ${report.settings.connections} connections, ${report.settings.durationSeconds} s per variant per round ` +
      `after ${report.settings.warmupSeconds} s warm-up; medians over rounds. Load average before/after: ` +
      `${report.loadAverage.before.map(f2).join(' ')} / ${report.loadAverage.after.map(f2).join(' ')}. Baseline: ${report.baseline}.`,
    '',
    markdownTable(HEADER, resultRows(report)),
    '',
    'Redis commands per request, by command (INFO commandstats; those inside the limiter script included):',
    '',
    commandBreakdown(report),
    '',
    markdownTable(['process', 'RSS at start MiB', 'RSS at end MiB', 'peak RSS MiB'], rss),
    '',
    markdownTable(['target', 'this run', 'figures'], targets),
    '',
  ].join('\n');
}

export function printTable(report: BenchReport): void {
  const rows = [HEADER, ...resultRows(report)];
  const widths = HEADER.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  const text = rows.map((r) => r.map((cell, i) => (i === 0 ? cell.padEnd(widths[i]!) : cell.padStart(widths[i]!))).join('  ')).join('\n');
  process.stdout.write(`\n${text}\n\n`);
  for (const [name, r] of Object.entries(report.rss)) {
    process.stdout.write(`  RSS ${name.padEnd(28)} start ${f0(r.startMiB)} MiB, end ${f0(r.endMiB)} MiB, peak ${f0(r.peakMiB)} MiB\n`);
  }
  process.stdout.write('\n');
  for (const t of checkTargets(report)) process.stdout.write(`  ${t.holds ? 'holds ' : 'MISSED'}  ${t.target}: ${t.figures}\n`);
}

/** bench/results/latest.json and latest.md; returns the files written. */
export function writeReport(report: BenchReport, dir: string): string[] {
  fs.mkdirSync(dir, { recursive: true });
  const json = path.join(dir, 'latest.json');
  const md = path.join(dir, 'latest.md');
  fs.writeFileSync(json, JSON.stringify({ ...report, targets: checkTargets(report) }, null, 2) + '\n');
  fs.writeFileSync(md, `# Benchmark: latest run\n\n${markdown(report)}`);
  return [json, md];
}
