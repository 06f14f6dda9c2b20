import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startRedisCluster, type RedisCluster } from '../test/support/redis-cluster';
import type { Fixture } from './fixture';
import { runLoad, type LoadResult } from './load';
import {
  RedisNodes,
  redisWork,
  startLeasesGateway,
  type LeasesGateway,
  type RedisTarget,
  type RedisWork,
} from './leases-fixture';
import { median, spreadPercent } from './verdict';

/**
 * `npm run bench -- --leases` (issue 50, item 5): leases of units beside the plain per-request path
 * in one run. Rows: a hot key (limits no run reaches) with leases off and on, on one Redis and on a
 * 3-master Cluster; two instances (one WORKERS=2) on one hot key; a key near its limit (a fresh key
 * of `nearLimitPerMinute` each round) with leases off and on. Every round runs every row once, the
 * order rotated by one each round; each leased row is divided by the plain row of the same round.
 * Per row: Redis commands, round trips (EVALSHA) and Redis CPU (INFO commandstats and the
 * redis-server processes' /proc) per admitted request, gateway CPU (supervisor and workers, /proc)
 * per request. See docs/benchmark.md.
 */

export interface LeasesBenchSettings {
  rounds: number;
  durationSeconds: number;
  warmupSeconds: number;
  connections: number;
  /** A checkout whose dist/main.js is the gateway measured (the working tree's by default). */
  gatewayRoot: string;
  /** The near-limit rows' key: this many requests a minute (a fresh key each round). */
  nearLimitPerMinute: number;
  /** Where the report goes (markdown). */
  out: string;
  /**
   * `--rate N`: the hot-key rows offered N requests/s in all instead of as many as the gateway
   * answers, so that every row's gateway does the same work a second and none saturates its core:
   * CPU per request is then compared at one load, not at each row's own throughput.
   */
  ratePerSecond?: number | null;
}

const HOT_LIMITS = { perMinute: 1_000_000_000, perDay: 1_000_000_000_000 };
const PLAIN = 'plain';
/** Load on each hot-key row once before the rounds. */
const WARMUP_SECONDS = 3;
/** Redis watched with no load before the rounds: what the idle gateways' timers and Redis's cron cost. */
const IDLE_SECONDS = 5;

interface Target {
  gateway: LeasesGateway;
  key: string;
  connections: number;
}

interface Row {
  id: string;
  label: string;
  /** The row each round's figures are divided by (null: it is a reference itself). */
  reference: string | null;
  /** Another row it is also divided by, round by round. */
  alsoAgainst?: string;
  redis: RedisNodes;
  gateways: LeasesGateway[];
  /** Fresh key each round (near its limit): no warm-up, which would use the window up. */
  freshKey: boolean;
  targets(): Promise<Target[]>;
}

export interface RowRound {
  round: number;
  sent: number;
  admitted: number;
  refused: number;
  otherResponses: number;
  requestsPerSecond: number;
  gatewayCpuMs: number;
  redis: RedisWork;
  leases: Record<string, number>;
  /** Near-limit rows: lease units taken per request Redis decided, by how full the window was. */
  grants: GrantStep[];
  /** How long the load ran (the longest of the row's loads), s. */
  seconds: number;
  /** UTC minutes the load ran in (a near-limit key gets a new window each). */
  minutes: number;
  loadAverage: number;
}

/** Per admitted request (per request for the gateway), the figures the table shows. */
export interface RowFigures {
  commandsPerAdmitted: number;
  roundTripsPerAdmitted: number;
  gatewayMicrosPerRequest: number;
  scriptMicrosPerAdmitted: number;
  commandMicrosPerAdmitted: number;
  redisProcessMicrosPerAdmitted: number;
  redisUsedCpuMicrosPerAdmitted: number;
}

export function figuresOf(r: RowRound): RowFigures {
  const admitted = Math.max(1, r.admitted);
  return {
    commandsPerAdmitted: r.redis.commands / admitted,
    roundTripsPerAdmitted: r.redis.scriptCalls / admitted,
    gatewayMicrosPerRequest: (r.gatewayCpuMs * 1000) / Math.max(1, r.sent),
    scriptMicrosPerAdmitted: r.redis.scriptUsec / admitted,
    commandMicrosPerAdmitted: r.redis.commandUsec / admitted,
    redisProcessMicrosPerAdmitted: (r.redis.processCpuMs * 1000) / admitted,
    redisUsedCpuMicrosPerAdmitted: (r.redis.usedCpuMs * 1000) / admitted,
  };
}

/** Past a lease's life (500 ms) and the sweep that returns it (100 ms): the last row's returns land before the counts. */
const settle = () => new Promise((resolve) => setTimeout(resolve, 700));

async function probe(target: Target, label: string): Promise<void> {
  const res = await fetch(`${target.gateway.url}/v1/pets`, { headers: { authorization: `Bearer ${target.key}` } });
  const body = await res.text();
  if (res.status !== 200) throw new Error(`${label}: answered ${res.status}, not 200: ${body.slice(0, 300)}`);
}

/**
 * Each target loaded at once for `seconds` (at `rate` requests/s in all when given), or (`amount`)
 * until that many requests in all were answered.
 */
function loadTargets(targets: Target[], seconds: number, amount?: number, rate?: number | null): Promise<LoadResult[]> {
  return Promise.all(
    targets.map((t) =>
      runLoad({
        url: `${t.gateway.url}/v1/pets`,
        connections: t.connections,
        durationSeconds: seconds,
        ...(amount ? { amount: Math.ceil(amount / targets.length) } : {}),
        ...(rate && !amount ? { overallRate: Math.round((rate * t.connections) / connectionsOf(targets)) } : {}),
        headers: { authorization: `Bearer ${t.key}` },
      }),
    ),
  );
}

function connectionsOf(targets: Target[]): number {
  return targets.reduce((sum, t) => sum + t.connections, 0);
}

async function leaseCounts(gateways: LeasesGateway[]): Promise<Record<string, number>> {
  const sums: Record<string, number> = {};
  for (const metrics of await Promise.all(gateways.map((g) => g.leaseMetrics())))
    for (const [name, value] of Object.entries(metrics)) sums[name] = (sums[name] ?? 0) + value;
  return sums;
}

interface LeaseSample {
  taken: number;
  decidedByRedis: number;
}

/** The gateways' lease metrics every 25 ms while a near-limit row runs: how the grants shrink as the window empties. */
function sampleLeases(gateways: LeasesGateway[]): { stop(): Promise<LeaseSample[]> } {
  const samples: LeaseSample[] = [];
  let running = true;
  const loop = (async () => {
    while (running) {
      const counts = await leaseCounts(gateways);
      samples.push({
        taken: counts['gateway_lease_units:taken'] ?? 0,
        decidedByRedis: counts['gateway_lease_admissions:store'] ?? 0,
      });
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      return samples;
    },
  };
}

/** Units taken per request Redis decided while the window went from `fromPercent` to `toPercent` full. */
export interface GrantStep {
  fromPercent: number;
  toPercent: number;
  unitsPerDecision: number;
}

/** Window fill at which the grants are shown: as it empties, 1/8 of what is left falls to nothing. */
const FILL_STEPS = [0, 50, 75, 90, 95, 99, 100];

/**
 * From the samples, units taken per Redis decision in each step of the window's fill (units
 * counted = lease units taken + requests Redis decided, out of `limit`; the probe's one unit aside).
 */
export function grantsOf(samples: LeaseSample[], limit: number): GrantStep[] {
  if (samples.length === 0) return [];
  const first = samples[0]!;
  const steps: GrantStep[] = [];
  for (let i = 0; i + 1 < FILL_STEPS.length; i++) {
    const [from, to] = [FILL_STEPS[i]!, FILL_STEPS[i + 1]!];
    const inStep = samples.filter((x) => {
      const fill = ((x.taken - first.taken + x.decidedByRedis - first.decidedByRedis) / limit) * 100;
      return fill >= from && fill <= to;
    });
    if (inStep.length < 2) continue;
    const [a, b] = [inStep[0]!, inStep[inStep.length - 1]!];
    const decided = b.decidedByRedis - a.decidedByRedis;
    if (decided > 0) steps.push({ fromPercent: from, toPercent: to, unitsPerDecision: (b.taken - a.taken) / decided });
  }
  return steps;
}

async function measureRow(row: Row, settings: LeasesBenchSettings, round: number): Promise<RowRound> {
  const targets = await row.targets();
  for (const t of targets) await probe(t, row.label);
  if (!row.freshKey) await loadTargets(targets, settings.warmupSeconds, undefined, settings.ratePerSecond);
  await settle();
  const cpu = () => row.gateways.reduce((sum, g) => sum + g.cpuMs(), 0);
  const leasesBefore = await leaseCounts(row.gateways);
  const redisBefore = await row.redis.read();
  const cpuBefore = cpu();
  const startMinute = Math.floor(Date.now() / 60_000);
  const sampling = row.freshKey ? sampleLeases(row.gateways) : null;
  // A fresh key near its limit: 1.1 x its limit in all, so the window empties and a tenth more are refused.
  const amount = row.freshKey ? Math.round(settings.nearLimitPerMinute * 1.1) : undefined;
  const results = await loadTargets(targets, settings.durationSeconds, amount, settings.ratePerSecond);
  const samples = sampling ? await sampling.stop() : [];
  const endMinute = Math.floor(Date.now() / 60_000);
  await settle();
  const gatewayCpuMs = cpu() - cpuBefore;
  const redisAfter = await row.redis.read();
  const leasesAfter = await leaseCounts(row.gateways);
  const leases: Record<string, number> = {};
  for (const [name, value] of Object.entries(leasesAfter)) leases[name] = value - (leasesBefore[name] ?? 0);
  const sum = (pick: (r: LoadResult) => number) => results.reduce((s, r) => s + pick(r), 0);
  const admitted = sum((r) => r.statuses['200'] ?? 0);
  const refused = sum((r) => r.statuses['429'] ?? 0);
  return {
    round,
    sent: sum((r) => r.sent),
    admitted,
    refused,
    otherResponses: sum((r) => r.requests) - admitted - refused + sum((r) => r.errors),
    requestsPerSecond: sum((r) => r.requestsPerSecond),
    gatewayCpuMs,
    redis: redisWork(redisAfter, redisBefore),
    leases,
    minutes: endMinute - startMinute + 1,
    grants: grantsOf(samples, settings.nearLimitPerMinute),
    seconds: Math.max(...results.map((r) => r.durationSeconds)),
    loadAverage: os.loadavg()[0]!,
  };
}

/** The gateways of the rows; `withLeases` false: a build without the switch (no CONFIG_FILE, leases never set). */
async function startGateways(
  settings: LeasesBenchSettings,
  fixture: Fixture,
  cluster: RedisCluster,
  withLeases: boolean,
  gateways: LeasesGateway[],
) {
  const single: RedisTarget = { url: fixture.redis.url };
  const clustered: RedisTarget = { clusterNodes: cluster.nodes };
  const start = async (name: string, redis: RedisTarget, leases: boolean, workers = 1) => {
    const gateway = await startLeasesGateway(name, {
      gatewayRoot: settings.gatewayRoot,
      workers,
      redis,
      upstreamUrl: fixture.upstream.url,
      workDir: fixture.workDir,
      leases: withLeases ? leases : null,
    });
    gateways.push(gateway);
    return { gateway, key: await gateway.createKey(HOT_LIMITS) };
  };
  return {
    plain: await start('gateway-plain', single, false),
    secondPlain: await start('gateway-second-plain-2-workers', single, false, 2),
    clusterPlain: await start('gateway-cluster-plain', clustered, false),
    ...(withLeases
      ? {
          leased: await start('gateway-leased', single, true),
          secondLeased: await start('gateway-second-leased-2-workers', single, true, 2),
          clusterLeased: await start('gateway-cluster-leased', clustered, true),
        }
      : {}),
  };
}

/**
 * Every row and its reference: the hot key leases off on one Redis for the leased hot-key rows
 * (issue 50's "the per-request row"), the near-limit key leases off for the near-limit key, and
 * for the two instances also the same two instances leases off (`alsoAgainst`).
 */
async function startRows(
  settings: LeasesBenchSettings,
  fixture: Fixture,
  cluster: RedisCluster,
  withLeases: boolean,
  gateways: LeasesGateway[],
): Promise<Row[]> {
  const g = await startGateways(settings, fixture, cluster, withLeases, gateways);
  const oneRedis = new RedisNodes('one Redis', [fixture.redis.port]);
  const clusterRedis = new RedisNodes('Cluster, 3 masters', cluster.ports);
  type Started = { gateway: LeasesGateway; key: string };
  const all = (s: Started) => async () => [{ ...s, connections: settings.connections }];
  const half = Math.max(1, Math.floor(settings.connections / 2));
  const two = (a: Started, b: Started) => async () => [
    { ...a, connections: half },
    { gateway: b.gateway, key: a.key, connections: settings.connections - half },
  ];
  const fresh = (s: Started) => async () => [
    {
      gateway: s.gateway,
      key: await s.gateway.createKey({ perMinute: settings.nearLimitPerMinute, perDay: HOT_LIMITS.perDay }),
      connections: settings.connections,
    },
  ];
  const near = `key near its limit (${settings.nearLimitPerMinute}/min)`;
  const twoLabel = 'hot key, 2 instances (1 and WORKERS=2)';
  const rows: Row[] = [
    row(PLAIN, 'hot key, leases off, one Redis', null, oneRedis, [g.plain.gateway], all(g.plain)),
    row(
      'cluster-plain',
      'hot key, leases off, Cluster',
      null,
      clusterRedis,
      [g.clusterPlain.gateway],
      all(g.clusterPlain),
    ),
    row(
      'two-instances-plain',
      `${twoLabel}, leases off, one Redis`,
      null,
      oneRedis,
      [g.plain.gateway, g.secondPlain.gateway],
      two(g.plain, g.secondPlain),
    ),
    row('near-limit-plain', `${near}, leases off`, null, oneRedis, [g.plain.gateway], fresh(g.plain), true),
  ];
  if (!g.leased || !g.secondLeased || !g.clusterLeased) return rows;
  rows.push(
    row('leased', 'hot key, leases on, one Redis', PLAIN, oneRedis, [g.leased.gateway], all(g.leased)),
    row(
      'cluster-leased',
      'hot key, leases on, Cluster',
      PLAIN,
      clusterRedis,
      [g.clusterLeased.gateway],
      all(g.clusterLeased),
    ),
    {
      ...row(
        'two-instances',
        `${twoLabel}, leases on, one Redis`,
        PLAIN,
        oneRedis,
        [g.leased.gateway, g.secondLeased.gateway],
        two(g.leased, g.secondLeased),
      ),
      alsoAgainst: 'two-instances-plain',
    },
    row(
      'near-limit-leased',
      `${near}, leases on`,
      'near-limit-plain',
      oneRedis,
      [g.leased.gateway],
      fresh(g.leased),
      true,
    ),
  );
  return rows;
}

function row(
  id: string,
  label: string,
  reference: string | null,
  redis: RedisNodes,
  gateways: LeasesGateway[],
  targets: () => Promise<Target[]>,
  freshKey = false,
): Row {
  return { id, label, reference, redis, gateways, targets, freshKey };
}

/** Redis's own work with no load for a few seconds: the idle gateways' timers and Redis's cron. */
async function idleRedis(redis: RedisNodes, seconds: number): Promise<RedisWork & { seconds: number }> {
  const before = await redis.read();
  await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
  return { ...redisWork(await redis.read(), before), seconds };
}

/** Whether the built gateway has the leases switch (`rateLimit.leases`) in its config schema. */
export function buildHasLeasesSwitch(gatewayRoot: string): boolean {
  const schema = path.join(gatewayRoot, 'dist', 'shared', 'config', 'schema.js');
  return fs.existsSync(schema) && /\bleases\s*:/.test(fs.readFileSync(schema, 'utf8'));
}

function commitOf(root: string): string {
  try {
    return execFileSync('git', ['-C', root, 'rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
  } catch {
    const marker = path.join(root, 'BENCH_COMMIT');
    return fs.existsSync(marker) ? fs.readFileSync(marker, 'utf8').trim() : 'unknown';
  }
}

export async function benchLeases(settings: LeasesBenchSettings, fixture: Fixture): Promise<void> {
  const withLeases = buildHasLeasesSwitch(settings.gatewayRoot);
  if (!withLeases)
    process.stdout.write(
      `leases: ${settings.gatewayRoot}/dist has no rateLimit.leases switch: the leased rows are left out\n`,
    );
  const cluster = await startRedisCluster({ masters: 3 });
  const gateways: LeasesGateway[] = [];
  let rows: Row[] = [];
  try {
    rows = await startRows(settings, fixture, cluster, withLeases, gateways);
    const startedAt = new Date();
    const loadBefore = os.loadavg();
    const idle = [await idleRedis(rows[0]!.redis, IDLE_SECONDS), await idleRedis(rows[1]!.redis, IDLE_SECONDS)];
    process.stdout.write(
      `leases: ${rows.length} rows x ${settings.rounds} rounds, autocannon ${settings.connections} connections, ` +
        `${settings.durationSeconds} s a row; load average ${loadBefore.map((l) => l.toFixed(2)).join(' ')}\n`,
    );
    // Every gateway warmed up once (its JIT, its pools) before the rounds: the first row is not the coldest.
    for (const r of rows) if (!r.freshKey) await loadTargets(await r.targets(), WARMUP_SECONDS);
    const runs = new Map<string, RowRound[]>(rows.map((r) => [r.id, []]));
    for (let round = 0; round < settings.rounds; round++) {
      for (let i = 0; i < rows.length; i++) {
        const r = rows[(i + round) % rows.length]!;
        const figures = await measureRow(r, settings, round + 1);
        runs.get(r.id)!.push(figures);
        const f = figuresOf(figures);
        process.stdout.write(
          `  round ${round + 1}/${settings.rounds}  ${r.label.padEnd(62)} ${figures.requestsPerSecond.toFixed(0).padStart(6)} req/s  ` +
            `200: ${figures.admitted} 429: ${figures.refused}  cmds/adm ${f.commandsPerAdmitted.toFixed(3)}  ` +
            `RT/adm ${f.roundTripsPerAdmitted.toFixed(3)}  gw ${f.gatewayMicrosPerRequest.toFixed(1)} µs/req  ` +
            `Redis script ${f.scriptMicrosPerAdmitted.toFixed(2)} µs/adm, process ${f.redisProcessMicrosPerAdmitted.toFixed(2)} µs/adm\n`,
        );
      }
    }
    const report = leasesReport({
      startedAt,
      finishedAt: new Date(),
      loadBefore,
      loadAfter: os.loadavg(),
      settings,
      commit: commitOf(settings.gatewayRoot),
      withLeases,
      rows: rows.map((r) => ({
        id: r.id,
        label: r.label,
        reference: r.reference,
        alsoAgainst: r.alsoAgainst,
        redis: r.redis.label,
      })),
      runs,
      idle: idle.map((w, i) => ({ redis: rows[i]!.redis.label, ...w })),
    });
    fs.mkdirSync(path.dirname(settings.out), { recursive: true });
    fs.writeFileSync(settings.out, report);
    process.stdout.write(`\n${report}\nwrote ${settings.out}\n`);
  } finally {
    await Promise.all(gateways.map((g) => g.stop()));
    for (const r of rows) r.redis.close();
    await cluster.stop();
  }
}

interface ReportInput {
  startedAt: Date;
  finishedAt: Date;
  loadBefore: number[];
  loadAfter: number[];
  settings: LeasesBenchSettings;
  commit: string;
  withLeases: boolean;
  rows: { id: string; label: string; reference: string | null; alsoAgainst?: string; redis: string }[];
  runs: Map<string, RowRound[]>;
  idle: (RedisWork & { seconds: number; redis: string })[];
}

const fixed = (n: number, digits: number) => (Number.isFinite(n) ? n.toFixed(digits) : '–');

function medianOf(rounds: RowRound[], pick: (f: RowFigures) => number): number {
  return median(rounds.map((r) => pick(figuresOf(r))));
}

/** Each round's figure of a row ÷ its reference's in the same round, median and spread. */
export function pairedRatio(
  rounds: RowRound[],
  reference: RowRound[],
  pick: (f: RowFigures) => number,
): { median: number; spread: number; each: number[] } {
  const each: number[] = [];
  for (const r of rounds) {
    const ref = reference.find((x) => x.round === r.round);
    if (ref) each.push(pick(figuresOf(r)) / pick(figuresOf(ref)));
  }
  return { median: median(each), spread: spreadPercent(each), each };
}

function ratioCell(ratio: { median: number; spread: number; each: number[] }): string {
  return `${fixed(ratio.median, 3)}× (${ratio.each.map((x) => fixed(x, 3)).join(' ')})`;
}

const TABLE_COLUMNS: [string, (f: RowFigures) => number, number][] = [
  ['Redis commands / admitted', (f) => f.commandsPerAdmitted, 3],
  ['round trips (EVALSHA) / admitted', (f) => f.roundTripsPerAdmitted, 4],
  ['gateway CPU µs / request', (f) => f.gatewayMicrosPerRequest, 1],
  ['Redis scripts µs / admitted (commandstats)', (f) => f.scriptMicrosPerAdmitted, 2],
  ['Redis all commands µs / admitted (commandstats, upper bound)', (f) => f.commandMicrosPerAdmitted, 2],
  ['redis-server CPU µs / admitted (/proc)', (f) => f.redisProcessMicrosPerAdmitted, 2],
  ['Redis used_cpu µs / admitted (INFO cpu)', (f) => f.redisUsedCpuMicrosPerAdmitted, 2],
];

function rowsTable(input: ReportInput): string[] {
  const lines = [
    `| row | req/s | 200 | 429 | ${TABLE_COLUMNS.map(([name]) => name).join(' | ')} | gateway CPU spread |`,
    `|---|${'---:|'.repeat(3 + TABLE_COLUMNS.length + 1)}`,
  ];
  for (const r of input.rows) {
    const rounds = input.runs.get(r.id)!;
    const cells = TABLE_COLUMNS.map(([, pick, digits]) => fixed(medianOf(rounds, pick), digits));
    const spread = spreadPercent(rounds.map((x) => figuresOf(x).gatewayMicrosPerRequest));
    lines.push(
      `| ${r.label} | ${fixed(median(rounds.map((x) => x.requestsPerSecond)), 0)} | ${fixed(median(rounds.map((x) => x.admitted)), 0)} | ` +
        `${fixed(median(rounds.map((x) => x.refused)), 0)} | ${cells.join(' | ')} | ${fixed(spread, 0)} % |`,
    );
  }
  return lines;
}

function ratiosTable(input: ReportInput): string[] {
  const lines = [
    '| row ÷ reference, paired by round | gateway CPU / request | Redis commands / admitted | round trips / admitted | Redis scripts µs / admitted | redis-server CPU / admitted |',
    '|---|---:|---:|---:|---:|---:|',
  ];
  const pairs = input.rows.flatMap((r) =>
    [r.reference, r.alsoAgainst].filter((x): x is string => !!x).map((reference) => ({ r, reference })),
  );
  for (const { r, reference: referenceId } of pairs) {
    const rounds = input.runs.get(r.id)!;
    const reference = input.runs.get(referenceId)!;
    const cell = (pick: (f: RowFigures) => number) => ratioCell(pairedRatio(rounds, reference, pick));
    lines.push(
      `| ${r.label} ÷ ${input.rows.find((x) => x.id === referenceId)!.label} | ${cell((f) => f.gatewayMicrosPerRequest)} | ` +
        `${cell((f) => f.commandsPerAdmitted)} | ${cell((f) => f.roundTripsPerAdmitted)} | ${cell((f) => f.scriptMicrosPerAdmitted)} | ` +
        `${cell((f) => f.redisProcessMicrosPerAdmitted)} |`,
    );
  }
  return lines;
}

function roundsTable(input: ReportInput): string[] {
  const lines = [
    '| row | round | load avg | minutes | sent | 200 | 429 | other | EVALSHA | commands | total_commands_processed | scripts µs | redis-server ms | gateway ms | lease metrics (Δ) |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|',
  ];
  for (const r of input.rows) {
    for (const x of input.runs.get(r.id)!) {
      const leases = Object.entries(x.leases)
        .filter(([, v]) => v !== 0)
        .map(([k, v]) => `${k.replace(/^gateway_/, '')} ${v}`)
        .join(', ');
      lines.push(
        `| ${r.id} | ${x.round} | ${fixed(x.loadAverage, 1)} | ${x.minutes} | ${x.sent} | ${x.admitted} | ${x.refused} | ${x.otherResponses} | ` +
          `${x.redis.scriptCalls} | ${x.redis.commands} | ${x.redis.commandsProcessed} | ${x.redis.scriptUsec} | ${x.redis.processCpuMs} | ` +
          `${x.gatewayCpuMs} | ${leases || '–'} |`,
      );
    }
  }
  return lines;
}

/**
 * The near-limit rows, round by round: the round trips that admitted (EVALSHA less the refusals,
 * each refusal being one), the lease units by outcome, and the admitted requests Redis decided
 * against those a lease did: as the window empties, grants fall to nothing and Redis decides each.
 */
function nearLimitLines(input: ReportInput): string[] {
  const ids = ['near-limit-plain', 'near-limit-leased'].filter((id) => input.runs.has(id));
  // "Decided by Redis" and "from a lease" are the gateway's gateway_lease_admissions_total{decided_by}.
  if (ids.length === 0) return [];
  const lines = [
    '## Near the limit',
    '',
    '| row | round | minutes (windows) | 200 | 429 | EVALSHA | EVALSHA − 429 | lease units taken | used | returned | expired | 200 decided by Redis | 200 from a lease | units taken per Redis decision, by how full the window was |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|',
  ];
  for (const id of ids) {
    for (const x of input.runs.get(id)!) {
      const units = (outcome: string) => x.leases[`gateway_lease_units:${outcome}`] ?? 0;
      lines.push(
        `| ${id} | ${x.round} | ${x.minutes} | ${x.admitted} | ${x.refused} | ${x.redis.scriptCalls} | ${x.redis.scriptCalls - x.refused} | ` +
          `${units('taken')} | ${units('used')} | ${units('returned')} | ${units('expired')} | ` +
          `${x.leases['gateway_lease_admissions:store'] ?? '–'} | ${x.leases['gateway_lease_admissions:lease'] ?? '–'} | ` +
          `${x.grants.map((g) => `${g.fromPercent}-${g.toPercent} %: ${fixed(g.unitsPerDecision, 1)}`).join(', ') || '–'} |`,
      );
    }
  }
  return [...lines, ''];
}

/** Holds when every round is within the limit, missed when none is, else undecided (the rounds disagree). */
function judgeRounds(values: number[], limit: number): string {
  if (values.length === 0) return 'no rounds';
  const within = values.filter((v) => v <= limit).length;
  const verdict = within === values.length ? 'holds' : within === 0 ? 'missed' : 'undecided';
  return `${verdict} (${values.map((v) => fixed(v, 3)).join(', ')})`;
}

/** Issue 50's "Done when" figures, judged round by round on this run. */
function doneWhenLines(input: ReportInput): string[] {
  if (!input.withLeases) return [];
  const plain = input.runs.get(PLAIN)!;
  const lines = ["## Issue 50's figures, round by round", ''];
  for (const id of ['leased', 'two-instances', 'cluster-leased']) {
    const rounds = input.runs.get(id);
    if (!rounds) continue;
    const each = (pick: (f: RowFigures) => number) => rounds.map((r) => pick(figuresOf(r)));
    const paired = (pick: (f: RowFigures) => number) => pairedRatio(rounds, plain, pick).each;
    lines.push(
      `- ${input.rows.find((r) => r.id === id)!.label}: Redis commands per admitted request ≤ 0.05: ` +
        `${judgeRounds(
          each((f) => f.commandsPerAdmitted),
          0.05,
        )}; round trips ≤ 0.02: ${judgeRounds(
          each((f) => f.roundTripsPerAdmitted),
          0.02,
        )}; ` +
        `Redis CPU ≤ 1/20 of the plain row's (scripts' usec): ${judgeRounds(
          paired((f) => f.scriptMicrosPerAdmitted),
          0.05,
        )}, ` +
        `(redis-server /proc): ${judgeRounds(
          paired((f) => f.redisProcessMicrosPerAdmitted),
          0.05,
        )}; ` +
        `gateway CPU per request ≤ 0.85×: ${judgeRounds(
          paired((f) => f.gatewayMicrosPerRequest),
          0.85,
        )}.`,
    );
  }
  return [...lines, ''];
}

/** "One Redis core carries ≥ N× today's per-key ceiling", from Redis's own µs per admitted request. */
function ceilingLines(input: ReportInput): string[] {
  const plain = input.runs.get(PLAIN)!;
  const lines: string[] = [];
  const plainScript = medianOf(plain, (f) => f.scriptMicrosPerAdmitted);
  const plainProcess = medianOf(plain, (f) => f.redisProcessMicrosPerAdmitted);
  lines.push(
    `- Per-request path (row "${input.rows[0]!.label}"): ${fixed(plainScript, 2)} µs of scripts per admitted request ` +
      `(commandstats), ${fixed(plainProcess, 2)} µs of redis-server CPU (/proc): one Redis core at 100 % carries ` +
      `${fixed(1e6 / plainScript, 0)} requests/s of one key by the scripts' account, ${fixed(1e6 / plainProcess, 0)} by the process's ` +
      `(at 70 %: ${fixed(0.7e6 / plainProcess, 0)}).`,
  );
  for (const id of ['leased', 'two-instances', 'cluster-leased']) {
    const rounds = input.runs.get(id);
    if (!rounds || !input.withLeases) continue;
    const script = medianOf(rounds, (f) => f.scriptMicrosPerAdmitted);
    const proc = medianOf(rounds, (f) => f.redisProcessMicrosPerAdmitted);
    const scriptRatio = pairedRatio(rounds, plain, (f) => f.scriptMicrosPerAdmitted);
    const procRatio = pairedRatio(rounds, plain, (f) => f.redisProcessMicrosPerAdmitted);
    lines.push(
      `- ${input.rows.find((r) => r.id === id)!.label}: ${fixed(script, 3)} µs of scripts and ${fixed(proc, 2)} µs of redis-server CPU ` +
        `per admitted request: one Redis core carries ${fixed(1 / scriptRatio.median, 0)}× the per-request ceiling by the scripts' ` +
        `account (paired by round: ${scriptRatio.each.map((x) => fixed(1 / x, 0)).join(', ')}×), ${fixed(1 / procRatio.median, 0)}× by ` +
        `the process's (${procRatio.each.map((x) => fixed(1 / x, 0)).join(', ')}×), the least of the rounds being the claim. ` +
        `Net of the idle background: ${netOfIdle(input, id)}.`,
    );
  }
  return lines;
}

/**
 * The scripts' µs per admitted request less what Redis ran with no load over as long (the idle
 * gateways' timers: usage flushes, key checks), each round against the per-request row's, as the
 * ceiling multiple: what the key's own traffic costs, the background being paid whatever the key's rate.
 */
function netOfIdle(input: ReportInput, id: string): string {
  const net = (rowId: string) =>
    input.runs.get(rowId)!.map((r) => {
      const redis = input.rows.find((x) => x.id === rowId)!.redis;
      const idle = input.idle.find((w) => w.redis === redis)!;
      return {
        round: r.round,
        micros: Math.max(0, r.redis.scriptUsec - (idle.scriptUsec / idle.seconds) * r.seconds) / r.admitted,
      };
    });
  const plain = net(PLAIN);
  const each = net(id).map((x) => plain.find((p) => p.round === x.round)!.micros / x.micros);
  return `${each.map((x) => fixed(x, 0)).join(', ')}× (scripts' µs per admitted request, ${net(id)
    .map((x) => fixed(x.micros, 3))
    .join(', ')}, against ${plain.map((x) => fixed(x.micros, 2)).join(', ')})`;
}

export function leasesReport(input: ReportInput): string {
  const s = input.settings;
  const idle = input.idle.map(
    (w) =>
      `${w.redis}: ${fixed(w.commands / w.seconds, 1)} commands/s, ${fixed(w.scriptCalls / w.seconds, 1)} script calls/s, ` +
      `${fixed(w.scriptUsec / w.seconds, 0)} µs of scripts per s, ${fixed(w.usedCpuMs / w.seconds, 1)} ms of Redis CPU per s (INFO cpu)`,
  );
  return [
    `# Leases of units: bench rows (issue 50), ${input.startedAt.toISOString().slice(0, 16).replace('T', ' ')} UTC`,
    '',
    `\`npm run bench -- --leases --repeat ${s.rounds} --duration ${s.durationSeconds}${s.ratePerSecond ? ` --rate ${s.ratePerSecond}` : ''}\` (bench/leases.ts). Gateway: \`npm start\`'s ` +
      `dist/main.js of commit ${input.commit}${input.withLeases ? '' : ' (no leases switch in this build: plain rows only)'}; ` +
      `${os.cpus().length} cores (${os.cpus()[0]?.model ?? 'unknown'}), Node ${process.version}; load average ` +
      `${input.loadBefore.map((l) => l.toFixed(2)).join(' ')} before, ${input.loadAfter.map((l) => l.toFixed(2)).join(' ')} after ` +
      `(each round's 1-minute load below). autocannon in the bench process, ${s.connections} keep-alive connections ` +
      `(split 16 + 16 over the two instances), ${s.durationSeconds} s a row a round after ${s.warmupSeconds} s of warm-up ` +
      `(none for the near-limit rows: a fresh ${s.nearLimitPerMinute}/min key each round), ${s.rounds} rounds, the order rotated each round` +
      (s.ratePerSecond
        ? `; the hot-key rows offered ${s.ratePerSecond} requests/s in all (--rate), the near-limit rows as fast as answered. `
        : '. ') +
      `${input.startedAt.toISOString()} to ${input.finishedAt.toISOString()}.`,
    '',
    `Idle, before the rounds (every gateway's timers, Redis's cron): ${idle.join('; ')}.`,
    '',
    '## Medians over the rounds',
    '',
    ...rowsTable(input),
    '',
    '## Paired by round',
    '',
    ...ratiosTable(input),
    '',
    ...nearLimitLines(input),
    ...doneWhenLines(input),
    "## One key's ceiling on one Redis core",
    '',
    ...ceilingLines(input),
    '',
    '## Every round',
    '',
    ...roundsTable(input),
    '',
  ].join('\n');
}
