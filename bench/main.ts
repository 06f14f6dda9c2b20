import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startRedisServer, type RedisProcess } from '../test/support/redis-server';
import { processCpuMs, startChild, type BenchChild } from './processes';
import { runLoad, type LoadResult, type LoadSettings } from './load';
import { runWrk, wrkAvailable } from './wrk';
import { ADMIN_TOKEN, nginxAvailable, startGatewayProcess, startNginx } from './external';
import { h2loadAvailable, runH2load, type TlsProtocol } from './h2load';
import { makeTestCertificates } from '../test/support/tls-certs';
import { gatewayTimings, runBrownout, startSwitchableInventory, type BrownoutSettings } from './brownout';
import { runNoisyNeighbour, startSlowInventory, type NoisyNeighbourSettings } from './noisy-neighbour';
import { RedisCommandStats, difference, type CommandCounts } from './redis-stats';
import { hottestFunctions, stepCosts, timeByModule } from './profile';
import { floodGateway } from './flood';
import { benchKeyBackup } from './key-backup';
import { measureLogLine } from './log-line';
import { writeReport, printTable, type BenchReport, type VariantSummary, type RssFigures } from './report';
import { median, spreadPercent } from './verdict';
import { measureFairQueueIdle } from './fair-queue-idle';
import { DEFAULT_INSTRUCTION_SETTINGS, measureInstructions, type InstructionSettings } from './instructions';
import type { Fixture } from './fixture';
import { benchLeases } from './leases';

/**
 * `npm run bench`: what the gateway costs on top of a plain proxy, measured side by side in one run.
 * Everything listens on 127.0.0.1; every load is bounded by its duration. See docs/benchmark.md.
 */

interface Settings {
  rounds: number;
  durationSeconds: number;
  warmupSeconds: number;
  connections: number;
  /** Requests of a soak run against the Redis gateway instead of comparing variants (0: none). */
  soakRequests: number;
  quick: boolean;
  /** Profile the gateway with this forwarder instead of comparing variants. */
  profile: 'undici' | 'http-proxy' | null;
  /** Profile the gateway on its in-process store instead of Redis. */
  inProcess: boolean;
  /** Profile the gateway with tracing on at this sampling ratio (null: off). */
  tracedRatio: number | null;
  /** The load generator: wrk when it is installed (it leaves the server the CPU it needs), else autocannon. */
  client: 'wrk' | 'autocannon';
  /** Variant ids to run (the baseline always runs), for a quick look at a few; null: all. */
  only: string[] | null;
  /** `--brownout`: the inventory hanging for part of the run instead of comparing variants. */
  brownout: BrownoutSettings | null;
  /** `--noisy-neighbour`: one loud key and two quiet ones on a slow inventory (issue 43). */
  noisyNeighbour?: NoisyNeighbourSettings;
  /** Made-up keys from one address against the Redis gateway instead of comparing variants. */
  flood: boolean;
  /** Another checkout's dist-bench/bench (`--compare-with DIR`): its gateway as a row beside this one's. */
  compareWith: string | null;
  /** `--log-line`: the request line's formatting cost, each logger, instead of comparing variants. */
  logLine: boolean;
  /** `--key-backup [--keys N]`: import, export and listing of N keys on Redis instead of comparing variants (0: off). */
  keyBackup: number;
  /** `--instructions`: instructions per request under callgrind, and the per-step table (issue 51), instead of comparing variants. */
  instructions?: InstructionSettings;
  /** `--leases [--gateway-root DIR]`: leases of units beside the plain per-request path (issue 50, bench/leases.ts). */
  leases?: { gatewayRoot: string; ratePerSecond?: number | null };
}

function parseArgs(argv: string[]): Settings {
  const quick = argv.includes('--quick');
  const settings: Settings = quick
    ? {
        rounds: 1,
        durationSeconds: 2,
        warmupSeconds: 1,
        connections: 32,
        soakRequests: 0,
        quick,
        profile: null,
        inProcess: false,
        tracedRatio: null,
        client: 'autocannon',
        only: null,
        brownout: null,
        flood: false,
        compareWith: null,
        logLine: false,
        keyBackup: 0,
      }
    : {
        rounds: 3,
        durationSeconds: 8,
        warmupSeconds: 1,
        connections: 32,
        soakRequests: 0,
        quick,
        profile: null,
        inProcess: false,
        tracedRatio: null,
        client: 'autocannon',
        only: null,
        brownout: null,
        flood: false,
        compareWith: null,
        logLine: false,
        keyBackup: 0,
      };
  settings.client = wrkAvailable() ? 'wrk' : 'autocannon';
  for (let i = 0; i < argv.length; i++) {
    const value = Number(argv[i + 1]);
    switch (argv[i]) {
      // --repeat N: every row once a round, N rounds, each row's rounds spread over the whole run (--rounds: its older name).
      case '--repeat':
      case '--rounds':
        if (!(Number.isInteger(value) && value >= 1))
          throw new Error(`${argv[i]} takes a whole number of rounds (1 or more)`);
        settings.rounds = value;
        break;
      case '--duration':
        settings.durationSeconds = value;
        break;
      case '--connections':
        settings.connections = value;
        break;
      case '--soak':
        settings.soakRequests = value;
        break;
      case '--profile':
        settings.profile = argv[i + 1] === 'http-proxy' ? 'http-proxy' : 'undici';
        break;
      case '--in-process':
        settings.inProcess = true;
        break;
      case '--traced':
        if (!(value >= 0 && value <= 1)) throw new Error('--traced takes a sampling ratio from 0 to 1');
        settings.tracedRatio = value;
        break;
      case '--only':
        settings.only = argv[i + 1]!.split(',');
        break;
      case '--client':
        if (argv[i + 1] !== 'wrk' && argv[i + 1] !== 'autocannon') throw new Error('--client takes wrk or autocannon');
        if (argv[i + 1] === 'wrk' && !wrkAvailable())
          throw new Error('--client wrk: wrk is not installed (Debian: apt-get install wrk)');
        settings.client = argv[i + 1] as 'wrk' | 'autocannon';
        break;
      case '--noisy-neighbour':
        settings.noisyNeighbour = { loudConnections: 1000, quietRequests: 100 };
        break;
      case '--brownout':
        settings.brownout = { burst: 3000, sustainSeconds: 120, arrivalsPerSecond: 100 };
        break;
      case '--burst':
      case '--sustain':
      case '--arrivals':
        if (!settings.brownout) throw new Error(`${argv[i]} goes after --brownout`);
        settings.brownout[
          argv[i] === '--burst' ? 'burst' : argv[i] === '--sustain' ? 'sustainSeconds' : 'arrivalsPerSecond'
        ] = value;
        break;
      case '--quick':
        break;
      case '--flood':
        settings.flood = true;
        break;
      case '--log-line':
        settings.logLine = true;
        break;
      case '--key-backup':
        settings.keyBackup = settings.keyBackup || 100_000;
        break;
      case '--keys':
        settings.keyBackup = value;
        break;
      case '--instructions':
        settings.instructions = { ...DEFAULT_INSTRUCTION_SETTINGS };
        break;
      case '--requests':
      case '--warmup-requests':
      case '--cpu-requests':
        if (!settings.instructions) throw new Error(`${argv[i]} goes after --instructions`);
        if (!(Number.isInteger(value) && value >= 1)) throw new Error(`${argv[i]} takes a whole number of requests`);
        settings.instructions[
          argv[i] === '--requests' ? 'requests' : argv[i] === '--warmup-requests' ? 'warmupRequests' : 'cpuRequests'
        ] = value;
        break;
      case '--leases':
        settings.leases = { ...settings.leases, gatewayRoot: settings.leases?.gatewayRoot ?? repoRoot };
        break;
      case '--gateway-root':
        settings.leases = { ...settings.leases, gatewayRoot: path.resolve(argv[i + 1]!) };
        break;
      case '--rate':
        if (!settings.leases) throw new Error('--rate goes after --leases');
        if (!(Number.isInteger(value) && value >= 1))
          throw new Error('--rate takes a whole number of requests per second');
        settings.leases = { ...settings.leases, ratePerSecond: value };
        break;
      case '--compare-with':
        settings.compareWith = path.resolve(argv[i + 1]!);
        if (!fs.existsSync(path.join(settings.compareWith, 'children', 'gateway.js')))
          throw new Error(
            `--compare-with: no children/gateway.js under ${settings.compareWith} (give another checkout's dist-bench/bench after npm run bench there)`,
          );
        break;
      default:
        if (argv[i]!.startsWith('--'))
          throw new Error(
            `unknown option ${argv[i]} (options: --quick, --brownout [--burst N] [--sustain S] [--arrivals N], --noisy-neighbour, --repeat N, --duration S, --connections N, --client wrk|autocannon, --only ID,ID, --soak REQUESTS, --flood, --key-backup [--keys N], --instructions [--requests N] [--warmup-requests N] [--cpu-requests N], --profile undici|http-proxy [--in-process] [--traced RATIO], --leases [--gateway-root DIR] [--rate N])`,
          );
    }
  }
  return settings;
}

const BASELINE = 'bare-http-proxy';
/** The reference proxy, when nginx is installed: one worker, and two against WORKERS=2. */
const NGINX = 'nginx-1-worker';
const NGINX_2 = 'nginx-2-workers';
/** Tracing on against the same gateway off (gateway-redis-undici): the cost of CONTRACT §10. */
const TRACING_OFF = 'gateway-redis-undici';
const TRACED_ALL = 'gateway-redis-undici-traced-100';
const TRACED_SOME = 'gateway-redis-undici-traced-001';
/** The forwarder the gateway uses unless upstream.forwarder says otherwise (config/default.yaml). */
const repoRoot = path.resolve(__dirname, '..', ...(path.extname(__filename) === '.ts' ? [] : ['..']));

interface Variant {
  id: string;
  label: string;
  child: BenchChild;
  /** Which API key to send, for gateway variants. */
  key?: 'admitted' | 'limited' | 'banned' | 'roundRobin';
  /** The status every response should have. */
  expectedStatus: number;
  usesRedis: boolean;
  /** A TLS row: loaded by h2load over this protocol (the certificate is the bench's own). */
  tls?: TlsProtocol;
}

interface RunFigures {
  load: LoadResult;
  /** CPU the server under test used during the run, and Redis's (0 when not used). */
  serverCpuMs: number;
  redisCpuMs: number;
  redisCommands: CommandCounts;
  /** Commands the server sent to Redis, when it can count them (null for process trees). */
  redisCommandsSent: number | null;
  /** Requests the server began to handle, when it counts them (the gateway, the fastify peer). */
  requestsReceived: number | null;
  /** Key-store lookups the server sent (HGET on the key store), when it counts them. */
  keyLookupsSent: number | null;
}

const settle = () => new Promise((resolve) => setTimeout(resolve, 200));

function headersFor(variant: Variant): Record<string, string> {
  // The round-robin rows probe with `admitted`; their load takes the keys one after another.
  const key = variant.key === 'roundRobin' ? 'admitted' : variant.key;
  return key ? { authorization: `Bearer ${variant.child.details[key]}` } : {};
}

/** One load with the chosen client; the soak always uses autocannon, which can stop after N requests; TLS rows use h2load. */
function load(settings: Settings, run: LoadSettings, tls?: TlsProtocol): Promise<LoadResult> {
  if (tls) return runH2load(run, tls);
  if (run.roundRobinKeys && settings.client !== 'wrk') {
    const keys = run.roundRobinKeys;
    let next = 0;
    return runLoad({ ...run, headersPerRequest: () => ({ authorization: `Bearer ${keys[next++ % keys.length]}` }) });
  }
  return settings.client === 'wrk' && !run.amount ? runWrk(run) : runLoad(run);
}

/** Responses other than the variant's expected status: wrk counts 2xx/3xx against the rest only. */
function unexpectedResponses(result: LoadResult, expectedStatus: number): number {
  if ('2xx' in result.statuses)
    return (expectedStatus < 300 ? result.statuses.other! : result.statuses['2xx']!) + result.errors;
  return result.requests - (result.statuses[String(expectedStatus)] ?? 0) + result.errors;
}

/**
 * One request before the load: the exact status, which wrk does not report. A gateway whose
 * circuit to the upstream is open (on a machine loaded by other work, a run's last requests can
 * time out) is given its cool-down and asked again, and the bench says so.
 */
async function probeStatus(variant: Variant): Promise<void> {
  // fetch refuses the bench's own certificate; h2load's per-request log gives each status instead.
  if (variant.tls) return;
  for (let attempt = 1; ; attempt++) {
    const res = await fetch(`${variant.child.url}/v1/pets`, { headers: headersFor(variant) });
    const body = await res.text();
    if (res.status === variant.expectedStatus) return;
    if (res.status === 503 && body.includes('upstream_unavailable') && attempt < 4) {
      process.stdout.write(
        `  ${variant.label}: circuit to the upstream open before the run (attempt ${attempt}); waiting for its cool-down\n`,
      );
      await new Promise((resolve) => setTimeout(resolve, 6000));
      continue;
    }
    throw new Error(`${variant.label}: answered ${res.status}, not ${variant.expectedStatus}: ${body.slice(0, 300)}`);
  }
}

async function measure(
  variant: Variant,
  settings: Settings,
  redisStats: RedisCommandStats | null,
  redisPid: number,
): Promise<RunFigures> {
  const url = `${variant.child.url}/v1/pets`;
  const headers = headersFor(variant);
  const roundRobinKeys = variant.key === 'roundRobin' ? variant.child.details.keys!.split(',') : undefined;
  await probeStatus(variant);
  await load(
    settings,
    { url, connections: settings.connections, durationSeconds: settings.warmupSeconds, headers, roundRobinKeys },
    variant.tls,
  );
  // Requests cut off by the end of a run still finish on the server; let them, before counting.
  await settle();
  const commandsBefore = variant.usesRedis && redisStats ? await redisStats.snapshot() : {};
  const before = await variant.child.stats();
  const cpuBefore = variant.child.cpuMs();
  const redisCpuBefore = processCpuMs(redisPid);
  const result = await load(
    settings,
    { url, connections: settings.connections, durationSeconds: settings.durationSeconds, headers, roundRobinKeys },
    variant.tls,
  );
  await settle();
  const serverCpuMs = variant.child.cpuMs() - cpuBefore;
  const redisCpuMs = variant.usesRedis ? processCpuMs(redisPid) - redisCpuBefore : 0;
  const after = await variant.child.stats();
  const commandsAfter = variant.usesRedis && redisStats ? await redisStats.snapshot() : {};
  return {
    load: result,
    serverCpuMs,
    redisCpuMs,
    redisCommands: difference(commandsAfter, commandsBefore),
    redisCommandsSent:
      before.redisCommandsSent === null || after.redisCommandsSent === null
        ? null
        : after.redisCommandsSent - before.redisCommandsSent,
    // A --compare-with build's older child may not send the field at all.
    requestsReceived:
      before.requestsReceived == null || after.requestsReceived == null
        ? null
        : after.requestsReceived - before.requestsReceived,
    keyLookupsSent:
      before.keyLookupsSent == null || after.keyLookupsSent == null
        ? null
        : after.keyLookupsSent - before.keyLookupsSent,
  };
}

function summarize(variant: Variant, runs: RunFigures[], baselineRps: number, nginxRps: number | null): VariantSummary {
  const requests = runs.reduce((sum, r) => sum + r.load.requests, 0);
  // Redis figures are per request the server saw: responses, plus those the end of a run cut off.
  const sent = runs.reduce((sum, r) => sum + r.load.sent, 0);
  const commands: CommandCounts = {};
  for (const run of runs) {
    for (const [name, calls] of Object.entries(run.redisCommands)) commands[name] = (commands[name] ?? 0) + calls;
  }
  const perRequest = (n: number) => (sent > 0 ? n / sent : 0);
  const unexpected = runs.reduce((sum, r) => sum + unexpectedResponses(r.load, variant.expectedStatus), 0);
  const roundTrips = runs.every((r) => r.redisCommandsSent !== null)
    ? runs.reduce((sum, r) => sum + r.redisCommandsSent!, 0)
    : null;
  // Round trips over the requests the server counted itself, when it does: wrk's count misses those cut off at the end of each round.
  const received = runs.every((r) => r.requestsReceived !== null)
    ? runs.reduce((sum, r) => sum + r.requestsReceived!, 0)
    : null;
  const rps = median(runs.map((r) => r.load.requestsPerSecond));
  // Requests the server saw (sent), so that those cut off at the end of a round count too.
  const cpuPerRound = runs.map((r) => (r.serverCpuMs * 1000) / r.load.sent);
  return {
    id: variant.id,
    label: variant.label,
    requestsPerSecond: rps,
    p50Ms: median(runs.map((r) => r.load.p50Ms)),
    p99Ms: median(runs.map((r) => r.load.p99Ms)),
    ratioToBaseline: rps / baselineRps,
    ratioToNginx: nginxRps ? rps / nginxRps : null,
    rounds: runs.map((r, i) => ({
      requestsPerSecond: r.load.requestsPerSecond,
      p50Ms: r.load.p50Ms,
      p99Ms: r.load.p99Ms,
      requests: r.load.requests,
      serverCpuMicrosPerRequest: cpuPerRound[i]!,
    })),
    requests,
    serverCpuMicrosPerRequest: median(cpuPerRound),
    cpuSpreadPercent: spreadPercent(cpuPerRound),
    redisCpuMicrosPerRequest: variant.usesRedis ? median(runs.map((r) => (r.redisCpuMs * 1000) / r.load.sent)) : null,
    expectedStatus: variant.expectedStatus,
    unexpectedResponses: unexpected,
    redis: variant.usesRedis
      ? {
          commandsPerRequest: perRequest(Object.values(commands).reduce((a, b) => a + b, 0)),
          roundTripsPerRequest: roundTrips === null ? null : received ? roundTrips / received : perRequest(roundTrips),
          roundTripsOverReceived: roundTrips !== null && received !== null,
          // The child's own count of key-store HGETs; INFO commandstats' HGET (scripts' included) for a build that does not count them.
          keyLookupsPerRequest: perRequest(
            runs.every((r) => r.keyLookupsSent !== null)
              ? runs.reduce((sum, r) => sum + r.keyLookupsSent!, 0)
              : (commands.hget ?? 0),
          ),
          byCommand: Object.fromEntries(Object.entries(commands).map(([name, calls]) => [name, perRequest(calls)])),
        }
      : null,
  };
}

function machine(): BenchReport['machine'] {
  const cpuinfo = fs.readFileSync('/proc/cpuinfo', 'utf8');
  return {
    nproc: os.availableParallelism(),
    cpuModel: /^model name\s*:\s*(.+)$/m.exec(cpuinfo)?.[1]?.trim() ?? os.cpus()[0]?.model ?? 'unknown',
    memoryGiB: Math.round(os.totalmem() / 2 ** 30),
    node: process.version,
    platform: `${os.type()} ${os.release()}`,
  };
}

const SOAK_FILE = () => path.join(repoRoot, 'bench', 'results', 'soak.json');

/** The last soak run, if any, so that latest.{json,md} can show it beside the comparison. */
function readSoak(): BenchReport['soak'] {
  try {
    return JSON.parse(fs.readFileSync(SOAK_FILE(), 'utf8')) as BenchReport['soak'];
  } catch {
    return null;
  }
}

/**
 * `--soak N`: N requests against the Redis gateway (undici), RSS compared from after a warm-up
 * tenth to the end. Writes bench/results/soak.json.
 */
async function soakGateway(settings: Settings, fixture: Fixture): Promise<void> {
  const child = await fixture.gateway('gateway-redis-undici-soak', 'undici', true);
  const url = `${child.url}/v1/pets`;
  const headers = { authorization: `Bearer ${child.details.admitted}` };
  const requests = settings.soakRequests;
  process.stdout.write(
    `soak: ${requests} requests against the Redis gateway (undici), ${settings.connections} connections\n`,
  );
  await runLoad({
    url,
    connections: settings.connections,
    durationSeconds: 0,
    amount: Math.round(requests / 10),
    headers,
  });
  const startBytes = child.rssBytes();
  let peakBytes = startBytes;
  const sampler = setInterval(() => (peakBytes = Math.max(peakBytes, child.rssBytes())), 1000);
  const load = await runLoad({ url, connections: settings.connections, durationSeconds: 0, amount: requests, headers });
  clearInterval(sampler);
  const endBytes = child.rssBytes();
  const result = {
    requests: load.requests,
    startMiB: startBytes / 2 ** 20,
    endMiB: endBytes / 2 ** 20,
    peakMiB: Math.max(peakBytes, endBytes) / 2 ** 20,
    growthPercent: ((endBytes - startBytes) / startBytes) * 100,
    requestsPerSecond: load.requestsPerSecond,
    finishedAt: new Date().toISOString(),
  };
  fs.mkdirSync(path.dirname(SOAK_FILE()), { recursive: true });
  fs.writeFileSync(SOAK_FILE(), JSON.stringify(result, null, 2) + '\n');
  process.stdout.write(
    `RSS after warm-up ${result.startMiB.toFixed(0)} MiB, at the end ${result.endMiB.toFixed(0)} MiB (${result.growthPercent.toFixed(1)} %), ` +
      `peak ${result.peakMiB.toFixed(0)} MiB; ${load.requestsPerSecond.toFixed(0)} req/s. Wrote ${path.relative(repoRoot, SOAK_FILE())}\n`,
  );
}

/**
 * `--brownout`: `npm start`'s gateway (dist/main.js, the default config, one process, Redis) in
 * front of an inventory that hangs for part of the run. Writes bench/results/brownout.json.
 */
async function brownoutGateway(brownout: BrownoutSettings, fixture: Fixture): Promise<void> {
  const inventory = await startSwitchableInventory();
  try {
    const gateway = await startGatewayProcess('gateway-brownout', {
      repoRoot,
      workers: 1,
      redisUrl: fixture.redis.url,
      upstreamUrl: inventory.url,
      workDir: fixture.workDir,
      appEnv: 'development',
    });
    fixture.children.push(gateway);
    process.stdout.write(
      `brownout: ${brownout.burst} requests at once, then ${brownout.arrivalsPerSecond}/s for ${brownout.sustainSeconds} s, with the inventory hanging
`,
    );
    const run = await runBrownout(brownout, inventory, {
      gateway,
      adminUrl: gateway.details.adminUrl!,
      adminToken: ADMIN_TOKEN,
    });
    const result = {
      ...run,
      asTheGatewayTimedThem: gatewayTimings(path.join(fixture.workDir, 'gateway-brownout.log')),
    };
    const file = path.join(repoRoot, 'bench', 'results', 'brownout.json');
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, JSON.stringify({ ...result, finishedAt: new Date().toISOString() }, null, 2) + '\n');
    const { samplesMiB: _samples, ...rss } = result.rss;
    process.stdout.write(`${JSON.stringify({ ...result, rss }, null, 2)}\nWrote ${path.relative(repoRoot, file)}\n`);
  } finally {
    await inventory.close();
  }
}

/**
 * `--noisy-neighbour`: `npm start`'s gateway (default config, one process, Redis) in front of an
 * inventory answering in 1 s, one loud key and two quiet ones. Writes bench/results/noisy-neighbour.json.
 */
async function noisyNeighbourGateway(settings: NoisyNeighbourSettings, fixture: Fixture): Promise<void> {
  const inventory = await startSlowInventory();
  try {
    const gateway = await startGatewayProcess('gateway-noisy-neighbour', {
      repoRoot,
      workers: 1,
      redisUrl: fixture.redis.url,
      upstreamUrl: inventory.url,
      workDir: fixture.workDir,
      appEnv: 'development',
    });
    fixture.children.push(gateway);
    process.stdout.write(
      `noisy neighbour: ${settings.loudConnections} loud connections, ${settings.quietRequests} quiet requests one at a time, inventory answering in 1 s\n`,
    );
    const result = await runNoisyNeighbour(settings, {
      gateway,
      adminUrl: gateway.details.adminUrl!,
      adminToken: ADMIN_TOKEN,
    });
    const file = path.join(repoRoot, 'bench', 'results', 'noisy-neighbour.json');
    fs.writeFileSync(file, JSON.stringify({ ...result, finishedAt: new Date().toISOString() }, null, 2) + '\n');
    process.stdout.write(`${JSON.stringify(result, null, 2)}\nWrote ${path.relative(repoRoot, file)}\n`);
  } finally {
    await inventory.close();
  }
}

/** Upstream failures the gateways logged over the run, by reason: a loaded machine shows here first. */
function reportUpstreamFailures(workDir: string): void {
  for (const file of fs.readdirSync(workDir).filter((f) => f.endsWith('.log'))) {
    const reasons = new Map<string, number>();
    for (const match of fs
      .readFileSync(path.join(workDir, file), 'utf8')
      .matchAll(/"reason":"([^"]+)"[^\n]*"msg":"upstream failure"/g)) {
      reasons.set(match[1]!, (reasons.get(match[1]!) ?? 0) + 1);
    }
    if (reasons.size > 0)
      process.stdout.write(`${file}: upstream failures ${[...reasons].map(([r, n]) => `${r} ${n}`).join(', ')}\n`);
  }
}

async function withFixture(use: (fixture: Fixture) => Promise<void>): Promise<void> {
  const workDir = fs.mkdtempSync(path.join(os.tmpdir(), 'asg-bench-'));
  const children: BenchChild[] = [];
  let redis: RedisProcess | null = null;
  let redisStats: RedisCommandStats | null = null;
  const spawn = async (
    name: string,
    script: string,
    options: object,
    logFile?: string,
    nodeFlags?: string[],
    benchDir?: string,
    launcher?: string[],
  ) => {
    const child = await startChild(name, script, options, logFile, nodeFlags, benchDir, launcher);
    children.push(child);
    return child;
  };
  try {
    redis = await startRedisServer();
    redisStats = new RedisCommandStats(redis.url);
    const upstream = await spawn('upstream', 'upstream', {});
    const redisUrl = redis.url;
    const gateway: Fixture['gateway'] = (name, forwarder, withRedis, options = {}) => {
      const dataDir = path.join(workDir, name);
      fs.mkdirSync(dataDir);
      const childOptions = {
        target: upstream.url,
        redisUrl: withRedis ? redisUrl : null,
        namespace: `bench:${name}`,
        forwarder,
        dataDir,
        configDir: path.join(repoRoot, 'config'),
        banThreshold: options.banThreshold,
        minuteWindow: options.minuteWindow,
        tracing: options.tracing,
        extraKeys: options.extraKeys,
        monthAndCost: options.monthAndCost,
        allowlist100: options.allowlist100,
        consumerKeys: options.consumerKeys,
        admittedInConsumer: options.admittedInConsumer,
        maxInFlight: options.maxInFlight,
        underValgrind: options.underValgrind,
      };
      return spawn(
        name,
        'gateway',
        childOptions,
        path.join(workDir, `${name}.log`),
        options.nodeFlags,
        options.benchDir,
        options.launcher,
      );
    };
    await use({ redis, redisStats, upstream, spawn, gateway, children, workDir });
  } finally {
    await Promise.all(children.map((c) => c.stop()));
    reportUpstreamFailures(workDir);
    redisStats?.close();
    await redis?.stop();
    fs.rmSync(workDir, { recursive: true, force: true });
  }
}

/** Keys used one after another in the round-robin rows. */
const ROUND_ROBIN_KEYS = 1000;
/** Keys of the one consumer of gateway-redis-undici-consumer-100 (issue 38). */
const CONSUMER_KEYS = 100;
/** The max-in-flight row's limit: far above the bench's connections, so no request is refused. */
const MAX_IN_FLIGHT = 1000;
const FASTIFY_PEER = 'fastify-peer';
const OTHER_BUILD = 'gateway-redis-undici-other-build';

/** A row of the table: how to start its server (shared by rows that name the same server). */
interface VariantPlan extends Omit<Variant, 'child'> {
  server: string;
}

/**
 * Every row, in table order, and the servers behind them. Only the servers of the rows that run
 * (`--only`) are started: an idle gateway's timers are noise beside the one under load.
 */
async function startVariants(settings: Settings, fixture: Fixture): Promise<Variant[]> {
  const { upstream, spawn, gateway } = fixture;
  const maxSockets = 256;
  let otlpSink: Promise<BenchChild> | null = null;
  const sink = () => (otlpSink ??= spawn('otlp-sink', 'otlp-sink', {}));
  const servers: Record<string, () => Promise<BenchChild>> = {
    upstream: async () => upstream,
    'bare-http-proxy': () => spawn('bare-http-proxy', 'bare-http-proxy', { target: upstream.url, maxSockets }),
    'bare-undici': () => spawn('bare-undici', 'bare-undici', { target: upstream.url, maxSockets }),
    [FASTIFY_PEER]: () =>
      spawn(FASTIFY_PEER, FASTIFY_PEER, {
        target: upstream.url,
        redisUrl: fixture.redis.url,
        namespace: `bench:${FASTIFY_PEER}`,
        logFile: path.join(fixture.workDir, `${FASTIFY_PEER}.log`),
      }),
    'gateway-memory-http-proxy': () => gateway('gateway-memory-http-proxy', 'http-proxy', false),
    'gateway-memory-undici': () => gateway('gateway-memory-undici', 'undici', false),
    'gateway-redis-http-proxy': () => gateway('gateway-redis-http-proxy', 'http-proxy', true),
    'gateway-redis-undici': () => gateway('gateway-redis-undici', 'undici', true),
    // Issue 28: a month window and a cost rule on; compare with gateway-redis-undici (two windows).
    'gateway-redis-undici-month-cost': () =>
      gateway('gateway-redis-undici-month-cost', 'undici', true, { monthAndCost: true }),
    // Issue 39: the admitted key with a 100-range address list (the client in the last) and an operation list.
    'gateway-redis-undici-allowlist-100': () =>
      gateway('gateway-redis-undici-allowlist-100', 'undici', true, { allowlist100: true }),
    'gateway-redis-undici-1000-keys': () =>
      gateway('gateway-redis-undici-1000-keys', 'undici', true, { extraKeys: ROUND_ROBIN_KEYS }),
    'gateway-redis-undici-consumer-100': () =>
      gateway('gateway-redis-undici-consumer-100', 'undici', true, { consumerKeys: CONSUMER_KEYS }),
    // Issue 41: the plain key, one key of a consumer: the consumer's windows without the round-robin's 100 keys.
    'gateway-redis-undici-consumer-1': () =>
      gateway('gateway-redis-undici-consumer-1', 'undici', true, { admittedInConsumer: true }),
    // Issue 41: the plain key with a maxInFlight out of the run's reach (32 connections): a lease taken and released per request.
    'gateway-redis-undici-max-in-flight': () =>
      gateway('gateway-redis-undici-max-in-flight', 'undici', true, { maxInFlight: MAX_IN_FLIGHT }),
    'gateway-redis-never-bans': () =>
      gateway('gateway-redis-never-bans', 'undici', true, { banThreshold: 1_000_000_000 }),
    'gateway-redis-undici-sliding': () =>
      gateway('gateway-redis-undici-sliding', 'undici', true, { minuteWindow: 'sliding' }),
    'gateway-memory-undici-sliding': () =>
      gateway('gateway-memory-undici-sliding', 'undici', false, { minuteWindow: 'sliding' }),
    // Tracing on (docs/observability.md, Tracing): every request a root span sampled at the ratio, exported to a sink that discards.
    [TRACED_ALL]: async () =>
      gateway(TRACED_ALL, 'undici', true, { tracing: { sinkUrl: (await sink()).url, ratio: 1 } }),
    [TRACED_SOME]: async () =>
      gateway(TRACED_SOME, 'undici', true, { tracing: { sinkUrl: (await sink()).url, ratio: 0.01 } }),
    // Two workers against nginx with two: the gateway as npm start runs it, a supervisor and its workers.
    'gateway-redis-undici-2-workers': async () => {
      const child = await startGatewayProcess('gateway-redis-undici-2-workers', {
        repoRoot,
        workers: 2,
        redisUrl: fixture.redis.url,
        upstreamUrl: upstream.url,
        workDir: fixture.workDir,
      });
      fixture.children.push(child);
      return child;
    },
    [NGINX]: async () =>
      startNginx(NGINX, 1, upstream.url, fixture.workDir).then((child) => (fixture.children.push(child), child)),
    [OTHER_BUILD]: () => gateway(OTHER_BUILD, 'undici', true, { benchDir: settings.compareWith ?? undefined }),
    [NGINX_2]: async () =>
      startNginx(NGINX_2, 2, upstream.url, fixture.workDir).then((child) => (fixture.children.push(child), child)),
  };
  const plans = variantPlans().filter((p) => p.id !== OTHER_BUILD || settings.compareWith);
  if (!nginxAvailable()) {
    process.stdout.write('nginx is not installed (Debian: apt-get install nginx-light): the nginx rows are left out\n');
  }
  const keep = settings.only ? new Set([...settings.only, BASELINE]) : null;
  const chosen = plans.filter((p) => (!keep || keep.has(p.id)) && (nginxAvailable() || !p.server.startsWith('nginx')));
  const started = new Map<string, Promise<BenchChild>>();
  const childOf = (server: string) => {
    if (!started.has(server)) started.set(server, servers[server]!());
    return started.get(server)!;
  };
  return Promise.all(chosen.map(async ({ server, ...plan }) => ({ ...plan, child: await childOf(server) })));
}

/** The rows, in the order of the table. */
function variantPlans(): VariantPlan[] {
  const row = (id: string, label: string, more: Partial<VariantPlan> = {}): VariantPlan => ({
    id,
    label,
    server: id,
    expectedStatus: 200,
    usesRedis: false,
    ...more,
  });
  const admitted = { key: 'admitted' as const, usesRedis: true };
  return [
    row('upstream', 'upstream directly'),
    row(NGINX, 'nginx proxy_pass, 1 worker'),
    row(BASELINE, 'bare express + http-proxy-middleware'),
    row('bare-undici', 'bare node:http + undici forwarder'),
    // The stack a Node user would assemble instead: docs/benchmark.md says what it does and does not do.
    row(FASTIFY_PEER, 'fastify peer (rate-limit on Redis, reply-from, log)', admitted),
    row('gateway-memory-http-proxy', 'gateway, in-process store, http-proxy', { key: 'admitted' }),
    row('gateway-memory-undici', 'gateway, in-process store, undici', { key: 'admitted' }),
    row('gateway-redis-http-proxy', 'gateway, Redis, http-proxy', admitted),
    row('gateway-redis-undici', 'gateway, Redis, undici', admitted),
    // `--compare-with DIR`: the same gateway row built from another checkout, for a change's A/B in one run.
    row(OTHER_BUILD, 'gateway, Redis, undici (--compare-with build)', admitted),
    // Month window + cost 2 on the measured route: its CPU per request beside gateway-redis-undici (target: within 10 %).
    row('gateway-redis-undici-month-cost', 'gateway, Redis, undici, month window + cost rule', admitted),
    // Access policy at its largest: its CPU per request beside gateway-redis-undici (target: within 3 %).
    row('gateway-redis-undici-allowlist-100', 'gateway, Redis, undici, 100-range allowlist', admitted),
    row('gateway-redis-undici-1000-keys', `gateway, Redis, undici, ${ROUND_ROBIN_KEYS} keys round-robin`, {
      key: 'roundRobin',
      usesRedis: true,
    }),
    row(
      'gateway-redis-undici-consumer-100',
      `gateway, Redis, undici, a consumer of ${CONSUMER_KEYS} keys round-robin`,
      { key: 'roundRobin', usesRedis: true },
    ),
    // Issue 41: the new rows beside gateway-redis-undici (consumer: within 10 % and one round trip; the others within 5 %).
    row('gateway-redis-undici-consumer-1', 'gateway, Redis, undici, a consumer of 1 key', admitted),
    row('gateway-redis-undici-max-in-flight', `gateway, Redis, undici, maxInFlight ${MAX_IN_FLIGHT}`, admitted),
    // rateLimit.minuteWindow: sliding. The admitted key's limit is out of reach, so its log holds
    // every request of the last minute: the sliding window's worst case in memory and CPU.
    row('gateway-redis-undici-sliding', 'gateway, Redis, undici, sliding minute', admitted),
    row('gateway-memory-undici-sliding', 'gateway, in-process store, undici, sliding minute', { key: 'admitted' }),
    row('refused-429-limited', '429 rate_limited (Redis, undici)', {
      server: 'gateway-redis-never-bans',
      key: 'limited',
      expectedStatus: 429,
      usesRedis: true,
    }),
    row('refused-429-banned', '429 temporarily_banned (Redis, undici)', {
      server: 'gateway-redis-undici',
      key: 'banned',
      expectedStatus: 429,
      usesRedis: true,
    }),
    row(TRACED_ALL, 'gateway, Redis, undici, traced, ratio 1.0', admitted),
    row(TRACED_SOME, 'gateway, Redis, undici, traced, ratio 0.01', admitted),
    row('gateway-redis-undici-2-workers', 'gateway, Redis, undici, WORKERS=2', admitted),
    row(NGINX_2, 'nginx proxy_pass, 2 workers'),
  ];
}

/**
 * `--repeat N` rounds, every row once a round: drift of the machine over the run then reaches each
 * row alike. The fair queue idle is measured in this process at the end of each round when the
 * plain row runs (fair-queue-idle.ts).
 */
async function runRounds(
  settings: Settings,
  variants: Variant[],
  fixture: Fixture,
): Promise<{ runs: Map<string, RunFigures[]>; fairQueueIdle: BenchReport['fairQueueIdle'] }> {
  const runs = new Map<string, RunFigures[]>(variants.map((v) => [v.id, []]));
  const fairQueueIdle = variants.some((v) => v.id === TRACING_OFF)
    ? {
        inFlight: settings.connections,
        manyKeys: CONSUMER_KEYS,
        oneKeyMicros: [] as number[],
        manyKeysMicros: [] as number[],
      }
    : null;
  for (let round = 0; round < settings.rounds; round++) {
    // Each round starts one variant later, so no variant always runs first or right after another.
    for (let i = 0; i < variants.length; i++) {
      const variant = variants[(i + round) % variants.length]!;
      const figures = await measure(variant, settings, fixture.redisStats, fixture.redis.pid);
      runs.get(variant.id)!.push(figures);
      process.stdout.write(
        `  round ${round + 1}/${settings.rounds}  ${variant.label.padEnd(42)} ${figures.load.requestsPerSecond.toFixed(0).padStart(7)} req/s  ` +
          `p50 ${figures.load.p50Ms.toFixed(2)} ms  p99 ${figures.load.p99Ms.toFixed(2)} ms  ` +
          `CPU ${((figures.serverCpuMs * 1000) / figures.load.sent).toFixed(1)} µs/req\n`,
      );
    }
    if (fairQueueIdle) {
      const idle = measureFairQueueIdle(fairQueueIdle.inFlight, fairQueueIdle.manyKeys);
      fairQueueIdle.oneKeyMicros.push(idle.oneKeyMicros);
      fairQueueIdle.manyKeysMicros.push(idle.manyKeysMicros);
      process.stdout.write(
        `  round ${round + 1}/${settings.rounds}  fair queue idle: ${idle.oneKeyMicros.toFixed(3)} µs/req one key, ${idle.manyKeysMicros.toFixed(3)} µs/req ${fairQueueIdle.manyKeys} keys in turn\n`,
      );
    }
  }
  return { runs, fairQueueIdle };
}

/** Every variant, interleaved rounds; the table, the targets, bench/results/latest.{json,md}. */
async function compare(settings: Settings, fixture: Fixture): Promise<void> {
  const startedAt = new Date();
  const loadBefore = os.loadavg();
  const { children } = fixture;
  const variants = await startVariants(settings, fixture);
  await addTlsRows(settings, variants, fixture.children, fixture.workDir, fixture.upstream.url, fixture.redis.url);
  const rssAtStart = new Map(children.map((c) => [c.name, c.rssBytes()]));
  const estimate = Math.round(
    settings.rounds * variants.length * (settings.durationSeconds + settings.warmupSeconds + 0.3),
  );
  process.stdout.write(
    `bench: ${variants.length} variants x ${settings.rounds} round(s), ${settings.client}, ${settings.connections} connections, ` +
      `${settings.durationSeconds} s each after ${settings.warmupSeconds} s warm-up (about ${estimate} s); load average ${os
        .loadavg()
        .map((l) => l.toFixed(2))
        .join(' ')}\n`,
  );
  const { runs, fairQueueIdle } = await runRounds(settings, variants, fixture);

  const baselineRps = median(runs.get(BASELINE)!.map((r) => r.load.requestsPerSecond));
  const nginxRuns = runs.get(NGINX);
  const nginxRps = nginxRuns ? median(nginxRuns.map((r) => r.load.requestsPerSecond)) : null;
  const summaries = variants.map((v) => summarize(v, runs.get(v.id)!, baselineRps, nginxRps));
  const rss: Record<string, RssFigures> = {};
  for (const child of children) {
    rss[child.name] = {
      startMiB: rssAtStart.get(child.name)! / 2 ** 20,
      endMiB: child.rssBytes() / 2 ** 20,
      peakMiB: child.peakRssBytes() / 2 ** 20,
    };
  }

  const report: BenchReport = {
    startedAt: startedAt.toISOString(),
    finishedAt: new Date().toISOString(),
    settings: {
      rounds: settings.rounds,
      durationSeconds: settings.durationSeconds,
      warmupSeconds: settings.warmupSeconds,
      connections: settings.connections,
      quick: settings.quick,
      client: settings.client,
    },
    machine: machine(),
    loadAverage: { before: loadBefore, after: os.loadavg() },
    baseline: BASELINE,
    variants: summaries,
    rss,
    soak: readSoak(),
    fairQueueIdle,
  };
  printTable(report);
  printTracingCost(summaries);
  const written = writeReport(report, path.join(repoRoot, 'bench', 'results'));
  process.stdout.write(`\nwrote ${written.map((f) => path.relative(repoRoot, f)).join(', ')}\n`);
}

/** Tracing's cost as docs/observability.md states it: each traced row against the same gateway with tracing off. */
function printTracingCost(summaries: VariantSummary[]): void {
  const off = summaries.find((s) => s.id === TRACING_OFF);
  if (!off) return;
  for (const id of [TRACED_ALL, TRACED_SOME]) {
    const traced = summaries.find((s) => s.id === id);
    if (!traced) continue;
    const change = (traced.requestsPerSecond / off.requestsPerSecond - 1) * 100;
    const cpu = traced.serverCpuMicrosPerRequest - off.serverCpuMicrosPerRequest;
    process.stdout.write(
      `${traced.label}: ${change >= 0 ? '+' : ''}${change.toFixed(1)} % req/s, ${cpu >= 0 ? '+' : ''}${cpu.toFixed(1)} µs CPU per request, ` +
        `p50 ${traced.p50Ms.toFixed(2)} ms vs ${off.p50Ms.toFixed(2)} ms against tracing off\n`,
    );
  }
}

/** The gateway alone under load with --cpu-prof; prints where its time goes. */
async function profileGateway(settings: Settings, fixture: Fixture, forwarder: 'undici' | 'http-proxy'): Promise<void> {
  const profileDir = path.join(fixture.workDir, 'profile');
  const store = settings.inProcess ? 'memory' : 'redis';
  const tracing =
    settings.tracedRatio === null
      ? undefined
      : { sinkUrl: (await fixture.spawn('otlp-sink', 'otlp-sink', {})).url, ratio: settings.tracedRatio };
  const child = await fixture.gateway(`gateway-${store}-${forwarder}-profiled`, forwarder, !settings.inProcess, {
    nodeFlags: ['--cpu-prof', `--cpu-prof-dir=${profileDir}`],
    tracing,
  });
  const url = `${child.url}/v1/pets`;
  const headers = { authorization: `Bearer ${child.details.admitted}` };
  process.stdout.write(
    `profiling the gateway (${store} store, ${forwarder}) for ${settings.durationSeconds} s under ${settings.connections} connections\n`,
  );
  const warmup = await runLoad({
    url,
    connections: settings.connections,
    durationSeconds: settings.warmupSeconds,
    headers,
  });
  const load = await runLoad({
    url,
    connections: settings.connections,
    durationSeconds: settings.durationSeconds,
    headers,
  });
  await child.stop();
  const served = warmup.sent + load.sent;
  const file = fs.readdirSync(profileDir).find((f) => f.endsWith('.cpuprofile'));
  if (!file) throw new Error('the gateway wrote no .cpuprofile');
  const kept = path.join(repoRoot, 'bench', 'results', `gateway-${store}-${forwarder}.cpuprofile`);
  fs.mkdirSync(path.dirname(kept), { recursive: true });
  fs.copyFileSync(path.join(profileDir, file), kept);
  process.stdout.write(
    `${load.requestsPerSecond.toFixed(0)} req/s, p50 ${load.p50Ms.toFixed(2)} ms, p99 ${load.p99Ms.toFixed(2)} ms (the profiler slows it)\n\nself time by module:\n`,
  );
  const costs = stepCosts(kept, served);
  for (const m of timeByModule(kept, repoRoot).slice(0, 15)) {
    process.stdout.write(
      `  ${m.selfPercent.toFixed(1).padStart(5)} %  ${((m.selfPercent / 100) * costs.sampledMicros).toFixed(1).padStart(6)} µs/req  ${m.module}\n`,
    );
  }
  process.stdout.write('\nhottest functions (self time):\n');
  for (const h of hottestFunctions(kept, repoRoot))
    process.stdout.write(`  ${h.selfPercent.toFixed(1).padStart(5)} %  ${h.function}  ${h.where}\n`);
  process.stdout.write(
    `\nCPU per request by step (inclusive, µs; ${served} requests, ${costs.totalMicros.toFixed(1)} µs busy per request in all):\n`,
  );
  for (const c of costs.steps) process.stdout.write(`  ${c.micros.toFixed(1).padStart(6)} µs  ${c.step}\n`);
  process.stdout.write(`\nprofile kept in ${path.relative(repoRoot, kept)} (open it in Chrome DevTools)\n`);
}

async function main(): Promise<void> {
  const settings = parseArgs(process.argv.slice(2));
  if (settings.logLine) return measureLogLine();
  if (settings.instructions) {
    // --repeat, --connections and --only, wherever they stood on the command line.
    const connections = process.argv.includes('--connections')
      ? settings.connections
      : settings.instructions.connections;
    const instructions = {
      ...settings.instructions,
      repeats: settings.rounds,
      connections,
      only: settings.only,
      compareWith: settings.compareWith,
    };
    return withFixture((fixture) => measureInstructions(instructions, fixture, repoRoot));
  }
  if (settings.leases) {
    const { gatewayRoot, ratePerSecond } = settings.leases;
    const name = `${new Date().toISOString().slice(0, 10)}-leases${ratePerSecond ? `-rate-${ratePerSecond}` : ''}.md`;
    const out = path.join(repoRoot, 'bench', 'results', name);
    const leases = { ...settings, gatewayRoot, ratePerSecond, nearLimitPerMinute: 3000, out };
    return withFixture((fixture) => benchLeases(leases, fixture));
  }
  await withFixture((fixture) => {
    if (settings.profile) return profileGateway(settings, fixture, settings.profile);
    if (settings.soakRequests > 0) return soakGateway(settings, fixture);
    if (settings.brownout) return brownoutGateway(settings.brownout, fixture);
    if (settings.noisyNeighbour) return noisyNeighbourGateway(settings.noisyNeighbour, fixture);
    if (settings.keyBackup > 0) {
      return startGatewayProcess('gateway-key-backup', {
        repoRoot,
        workers: 1,
        redisUrl: fixture.redis.url,
        upstreamUrl: fixture.upstream.url,
        workDir: fixture.workDir,
      }).then(async (child) => {
        fixture.children.push(child);
        await benchKeyBackup(
          { keys: settings.keyBackup },
          child,
          fixture.redis.url,
          path.join(repoRoot, 'bench', 'results', 'key-backup.json'),
        );
      });
    }
    if (settings.flood) {
      return fixture
        .gateway('gateway-redis-undici-flood', 'undici', true)
        .then((child) =>
          floodGateway(settings, child, fixture.redisStats, path.join(repoRoot, 'bench', 'results', 'flood.json')),
        );
    }
    return compare(settings, fixture);
  });
}

main().catch((err: unknown) => {
  process.stderr.write(`bench: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});

/**
 * HTTPS rows (issue 29): the gateway with TLS_CERT_FILE and TLS_KEY_FILE (node:http2's secure
 * server: HTTP/2 and HTTP/1.1 by ALPN) beside nginx with the same certificate (`ssl http2`), each
 * loaded by h2load over HTTP/2 and over HTTPS/1.1 (`--h1`): the same client for all four, so that
 * CPU per request compares side by side. Left out, with a line saying so, without h2load or nginx.
 */
async function addTlsRows(
  settings: Settings,
  variants: Variant[],
  children: BenchChild[],
  workDir: string,
  upstreamUrl: string,
  redisUrl: string,
): Promise<void> {
  const tlsRows = ['gateway-tls-h2', 'gateway-tls-h1', 'nginx-tls-h2', 'nginx-tls-h1'];
  if (settings.only && !tlsRows.some((id) => settings.only!.includes(id))) return;
  if (!h2loadAvailable()) {
    process.stdout.write(
      'h2load is not installed (Debian: apt-get install nghttp2-client): the HTTPS rows are left out\n',
    );
    return;
  }
  const certs = makeTestCertificates({ validDays: 30 });
  const tls = { certFile: certs.serverCert, keyFile: certs.serverKey };
  const gateway = await startGatewayProcess('gateway-redis-undici-tls', {
    repoRoot,
    workers: 1,
    redisUrl,
    upstreamUrl,
    workDir,
    tls,
  });
  children.push(gateway);
  variants.push(
    {
      id: 'gateway-tls-h2',
      label: 'gateway, Redis, undici, HTTPS HTTP/2',
      child: gateway,
      key: 'admitted',
      expectedStatus: 200,
      usesRedis: true,
      tls: 'h2',
    },
    {
      id: 'gateway-tls-h1',
      label: 'gateway, Redis, undici, HTTPS/1.1',
      child: gateway,
      key: 'admitted',
      expectedStatus: 200,
      usesRedis: true,
      tls: 'http/1.1',
    },
  );
  if (!nginxAvailable()) return;
  const nginx = await startNginx('nginx-1-worker-tls', 1, upstreamUrl, workDir, tls);
  children.push(nginx);
  variants.push(
    {
      id: 'nginx-tls-h2',
      label: 'nginx ssl http2, 1 worker, HTTP/2',
      child: nginx,
      expectedStatus: 200,
      usesRedis: false,
      tls: 'h2',
    },
    {
      id: 'nginx-tls-h1',
      label: 'nginx ssl http2, 1 worker, HTTPS/1.1',
      child: nginx,
      expectedStatus: 200,
      usesRedis: false,
      tls: 'http/1.1',
    },
  );
}
