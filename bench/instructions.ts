import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import type { Fixture } from './fixture';
import { runLoad } from './load';
import { descendantPids, type BenchChild } from './processes';
import { startGatewayProcess } from './external';
import {
  attribute,
  callgrindTotals,
  parseCallgrind,
  parsePerfMap,
  perfMapResolver,
  type CallgrindProfile,
} from './callgrind';
import { classifyStep, STEP_ROWS } from './instruction-steps';
import { parseLeaseMetrics } from './leases-fixture';
import { judgeRatio, median, pairedRatios, spreadPercent, verdictText } from './verdict';

/**
 * `npm run bench -- --instructions` (issue 51): instructions per request, counted by callgrind,
 * for the Node floor, the fastify peer, the gateway and `WORKERS=2`, then CPU time per request of
 * the same servers outside valgrind, and the per-step table. See docs/benchmark.md.
 *
 * Each server runs under `valgrind --tool=callgrind --instr-atstart=no`: warmed up uncounted, then
 * `callgrind_control -i on`, and each repeat is `-z`, N requests at a fixed concurrency, `-d`:
 * the dump's totals over N. Redis, the upstream and the load generator run outside valgrind.
 */

export interface InstructionSettings {
  /** Counted requests per repeat. */
  requests: number;
  /** Requests before counting starts (JIT tiering, caches, pools). */
  warmupRequests: number;
  repeats: number;
  connections: number;
  /** Requests per CPU-time round (outside valgrind: 10 ms ticks need more requests than instructions do). */
  cpuRequests: number;
  only: string[] | null;
  /** `--compare-with DIR`: another checkout's dist-bench/bench, its gateway counted as a row beside this one's. */
  compareWith?: string | null;
}

export const DEFAULT_INSTRUCTION_SETTINGS: InstructionSettings = {
  requests: 1000,
  warmupRequests: 3000,
  repeats: 3,
  connections: 8,
  cpuRequests: 5000,
  only: null,
};

/**
 * Lets V8's perf map name JIT code (and each interpreted function its own trampoline copy) for the
 * per-step table; and a full GC on SIGUSR2 before each repeat (children/gc-on-signal.ts).
 */
const NODE_FLAGS = [
  '--perf-basic-prof',
  '--interpreted-frames-native-stack',
  '--expose-gc',
  '-r',
  path.join(__dirname, 'children', `gc-on-signal${path.extname(__filename)}`),
];

interface InstructionRow {
  id: string;
  label: string;
  /** Starts the row's server; `launcher` empty for the CPU-time rows. */
  start(name: string, launcher: string[], nodeFlags: string[]): Promise<BenchChild>;
  /** The server is a process tree (a supervisor and its workers): every process counted and summed. */
  tree: boolean;
  /** A per-step column for this row (every row has one; a tree's processes summed). */
  steps: boolean;
  /** The key the load presents (default: the child's `admitted`); '' for none. */
  key?: (details: Record<string, string>) => string;
  /** The answers the row is made of (default: 200 only); any other is counted beside the row. */
  statuses?: readonly number[];
}

/** A key of the gateway's shape that was never issued: refused 401 (or 429 once the address's anonymous limit is spent). */
const MADE_UP_KEY = 'asg_live_MadeUpKeyNeverIssued00000000000000';

/** The Authorization header a row's load sends. */
function headersOf(row: InstructionRow, child: BenchChild): Record<string, string> {
  const key = row.key ? row.key(child.details) : child.details.admitted;
  return key ? { authorization: `Bearer ${key}` } : {};
}

function expectedStatuses(row: InstructionRow): readonly number[] {
  return row.statuses ?? [200];
}

const FLOOR = 'node-floor';
const PEER = 'fastify-peer';
const GATEWAY = 'gateway-redis-undici';
const ONE_WORKER = 'gateway-npm-start-1-worker';
const TWO_WORKERS = 'gateway-npm-start-2-workers';
/** The gateway row built from another checkout (`--compare-with`): a change's before and after in one run. */
const OTHER_BUILD = 'gateway-redis-undici-other-build';
/** Refusals (issue 51: ≤ 0.3× an admitted request): the gateway's 429 of a used-up key, its 401 of a made-up one. */
const REFUSED_429 = 'gateway-refused-429';
const REFUSED_401 = 'gateway-refused-401';
/** Issue 50: the gateway child with leases off (every admitted request decided by Redis) and on (a hot key decided from leases). */
const LEASES_OFF = 'gateway-leases-off';
const LEASES_ON = 'gateway-leases-on';

/**
 * The two lease rows: the bench child as gateway-redis-undici starts it, config rateLimit.leases
 * set (children/gateway.ts `leases`). Spawned here: the fixture's gateway() passes no such option.
 */
function leaseRows(fixture: Fixture, repoRoot: string): InstructionRow[] {
  const start = (leases: 'off' | 'on') => (name: string, launcher: string[], flags: string[]) => {
    const dataDir = path.join(fixture.workDir, name);
    fs.mkdirSync(dataDir, { recursive: true });
    const options = {
      target: fixture.upstream.url,
      redisUrl: fixture.redis.url,
      namespace: `bench:${name}`,
      forwarder: 'undici',
      dataDir,
      configDir: path.join(repoRoot, 'config'),
      underValgrind: true,
      leases,
    };
    return fixture.spawn(
      name,
      'gateway',
      options,
      path.join(fixture.workDir, `${name}.log`),
      flags,
      undefined,
      launcher,
    );
  };
  return [
    {
      id: LEASES_OFF,
      label: 'gateway, leases off (every admitted request decided by Redis)',
      tree: false,
      steps: true,
      start: start('off'),
    },
    {
      id: LEASES_ON,
      label: 'gateway, leases on from 5 requests/s (a hot key)',
      tree: false,
      steps: true,
      start: start('on'),
    },
  ];
}

/** gateway_lease_admissions_total{decided_by="lease"} so far, from the child's /metrics; null for a server without it. */
async function leaseAdmissions(child: BenchChild): Promise<number | null> {
  const { adminUrl, adminToken } = child.details;
  if (!adminUrl) return null;
  const res = await fetch(`${adminUrl}/metrics`, { headers: { authorization: `Bearer ${adminToken ?? ''}` } });
  if (res.status !== 200) throw new Error(`${child.name}: /metrics answered ${res.status}`);
  return parseLeaseMetrics(await res.text())['gateway_lease_admissions:lease'] ?? 0;
}

/** The share of a load's admitted (200) requests decided from a lease, from the counts before and after it. */
function leaseShare(before: number | null, after: number | null, load: { statuses: Record<string, number> }): number {
  const admitted = load.statuses[200] ?? 0;
  return before === null || after === null || admitted === 0 ? NaN : (after - before) / admitted;
}

function rows(fixture: Fixture, repoRoot: string, compareWith: string | null): InstructionRow[] {
  const { upstream, spawn } = fixture;
  // A Redis command may wait longer than the default 200 ms in a server slowed 50x by valgrind.
  const configFile = path.join(fixture.workDir, 'instructions-config.yaml');
  fs.writeFileSync(configFile, 'redis:\n  commandTimeoutMs: 20000\nupstream:\n  timeoutMs: 120000\n');
  const npmStart = (workers: number) => (name: string, launcher: string[], nodeFlags: string[]) =>
    startGatewayProcess(name, {
      repoRoot,
      workers,
      redisUrl: fixture.redis.url,
      upstreamUrl: upstream.url,
      workDir: fixture.workDir,
      launcher,
      nodeFlags,
      configFile,
      readyTimeoutMs: 600_000,
    }).then((child) => {
      fixture.children.push(child);
      return child;
    });
  return [
    {
      id: FLOOR,
      label: 'Node floor: node:http + undici forwarder',
      tree: false,
      steps: true,
      start: (name, launcher, flags) =>
        spawn(
          name,
          'bare-undici',
          { target: upstream.url, maxSockets: 256, timeoutMs: 120_000 },
          undefined,
          flags,
          undefined,
          launcher,
        ),
    },
    {
      id: PEER,
      label: 'fastify peer (rate-limit on Redis, reply-from, log)',
      tree: false,
      steps: true,
      start: (name, launcher, flags) =>
        spawn(
          name,
          PEER,
          {
            target: upstream.url,
            redisUrl: fixture.redis.url,
            namespace: `bench:${name}`,
            logFile: path.join(fixture.workDir, `${name}.log`),
          },
          undefined,
          flags,
          undefined,
          launcher,
        ),
    },
    {
      id: GATEWAY,
      label: 'gateway, Redis, undici (bench child, one process)',
      tree: false,
      steps: true,
      start: (name, launcher, flags) =>
        fixture.gateway(name, 'undici', true, { nodeFlags: flags, launcher, underValgrind: true }),
    },
    ...(compareWith
      ? [
          {
            id: OTHER_BUILD,
            label: 'gateway, Redis, undici (--compare-with build)',
            tree: false,
            steps: true,
            start: (name: string, launcher: string[], flags: string[]) =>
              fixture.gateway(name, 'undici', true, {
                nodeFlags: flags,
                launcher,
                underValgrind: true,
                benchDir: compareWith,
              }),
          },
        ]
      : []),
    {
      id: REFUSED_429,
      label: 'gateway, 429 rate_limited (a key whose day is used up)',
      tree: false,
      steps: true,
      // Never banned: every request is the same refusal, a window used up.
      start: (name, launcher, flags) =>
        fixture.gateway(name, 'undici', true, {
          nodeFlags: flags,
          launcher,
          underValgrind: true,
          banThreshold: 1_000_000_000,
        }),
      key: (details) => details.limited ?? '',
      statuses: [429],
    },
    {
      id: REFUSED_401,
      label: 'gateway, 401 of a made-up key (429 once the address limit is spent)',
      tree: false,
      steps: true,
      start: (name, launcher, flags) =>
        fixture.gateway(name, 'undici', true, { nodeFlags: flags, launcher, underValgrind: true }),
      key: () => MADE_UP_KEY,
      statuses: [401, 429],
    },
    ...leaseRows(fixture, repoRoot),
    { id: ONE_WORKER, label: 'gateway as npm start runs it, WORKERS=1', tree: true, steps: true, start: npmStart(1) },
    {
      id: TWO_WORKERS,
      label: 'gateway as npm start runs it, WORKERS=2 (supervisor + 2 workers)',
      tree: true,
      steps: true,
      start: npmStart(2),
    },
  ];
}

const run = promisify(execFile);

/** One callgrind_control command to one process (never to every callgrind on the machine: other work may run one). */
async function callgrindControl(option: string[], pid: number): Promise<void> {
  const { stdout } = await run('callgrind_control', [...option, String(pid)], { timeout: 120_000 });
  if (!/OK/.test(stdout)) throw new Error(`callgrind_control ${option.join(' ')} ${pid}: ${stdout}`);
}

/** The processes of a row that run under valgrind: the root, and for a tree its workers too. */
function countedPids(child: BenchChild, tree: boolean): number[] {
  const pids = tree ? [child.pid, ...descendantPids(child.pid)] : [child.pid];
  return pids.filter((pid) => {
    try {
      return (
        /valgrind|callgrind/.test(fs.readlinkSync(`/proc/${pid}/exe`)) ||
        fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('callgrind')
      );
    } catch {
      return false;
    }
  });
}

interface CountedRepeat {
  requests: number;
  errors: number;
  /** Instructions per process (pid → Ir), summed for the row. */
  byProcess: Record<string, number>;
  instructions: number;
  /** The dump files, for the per-step table. */
  dumps: Record<string, string>;
  /** Share of the admitted requests decided from a lease (NaN: the server does not say). */
  fromLease: number;
  /** Requests per second the load reached under valgrind: what the lease sizes follow. */
  requestsPerSecond: number;
}

interface CountedRow {
  id: string;
  label: string;
  repeats: CountedRepeat[];
  /** Per-step instructions per request, one map per repeat (rows with steps only). */
  steps: Array<Record<string, number>>;
}

const settle = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A full GC in each process (SIGUSR2, children/gc-on-signal.ts), waited for by its count file. */
async function collectGarbage(pids: number[], gcDir: string): Promise<void> {
  const count = (pid: number) => {
    try {
      return Number(fs.readFileSync(path.join(gcDir, `${pid}.gc`), 'utf8'));
    } catch {
      return 0;
    }
  };
  const before = pids.map(count);
  for (const pid of pids) process.kill(pid, 'SIGUSR2');
  const deadline = Date.now() + 300_000;
  while (pids.some((pid, i) => count(pid) <= before[i]!)) {
    if (Date.now() > deadline)
      throw new Error(`no full GC within 300 s in ${pids.join(', ')} (is gc-on-signal preloaded?)`);
    await settle(200);
  }
}

/** The newest dump callgrind wrote for a pid: `<id>.<pid>.out.<n>`, n counting the dumps. */
function newestDump(dir: string, id: string, pid: number): string {
  const prefix = `${id}.${pid}.out.`;
  const dumps = fs
    .readdirSync(dir)
    .filter((f) => f.startsWith(prefix))
    .sort((a, b) => Number(a.slice(prefix.length)) - Number(b.slice(prefix.length)));
  if (dumps.length === 0) throw new Error(`no callgrind dump for ${id} (pid ${pid}) in ${dir}`);
  return path.join(dir, dumps[dumps.length - 1]!);
}

/** Per-step instructions per request of one dump, JIT code named by the process's perf map. */
function stepTable(dump: string, pid: number, requests: number): Record<string, number> {
  const profile: CallgrindProfile = parseCallgrind(fs.readFileSync(dump, 'utf8'));
  const perfMap = parsePerfMap(
    fs.existsSync(`/tmp/perf-${pid}.map`) ? fs.readFileSync(`/tmp/perf-${pid}.map`, 'utf8') : '',
  );
  const byRow = attribute(profile, classifyStep, perfMapResolver(perfMap));
  return Object.fromEntries([...byRow].map(([row, instructions]) => [row, instructions / requests]));
}

/**
 * A row's server under callgrind. Started one at a time, and again (three tries) if it fails: `npm start`
 * gives Redis 5 s to answer at startup, which a process under valgrind misses while others start.
 */
async function startCounted(row: InstructionRow, dir: string): Promise<BenchChild> {
  const launcher = [
    'valgrind',
    '--tool=callgrind',
    '--instr-atstart=no',
    // V8 writes and rewrites machine code in anonymous memory: valgrind must notice.
    '--smc-check=all-non-file',
    '--trace-children=yes',
    `--callgrind-out-file=${dir}/${row.id}.%p.out`,
    `--log-file=${dir}/${row.id}.%p.log`,
  ];
  // Three tries: at load 17 `npm start` under valgrind missed its 5 s for Redis twice running.
  for (let attempt = 1; ; attempt++) {
    try {
      return await row.start(`${row.id}-callgrind${attempt > 1 ? `-try${attempt}` : ''}`, launcher, NODE_FLAGS);
    } catch (err) {
      if (attempt === 3) throw err;
      process.stdout.write(
        `  ${row.id}: did not start under valgrind (${(err as Error).message.split('\n')[0]}); once more\n`,
      );
    }
  }
}

/** A row under callgrind: warm-up uncounted, then each repeat counted and dumped. */
async function countRow(
  row: InstructionRow,
  child: BenchChild,
  settings: InstructionSettings,
  dir: string,
): Promise<CountedRow> {
  const url = `${child.url}/v1/pets`;
  const headers = headersOf(row, child);
  const expected = expectedStatuses(row);
  const probe = await fetch(url, { headers });
  await probe.arrayBuffer();
  if (!expected.includes(probe.status))
    throw new Error(`${row.label}: answered ${probe.status}, not ${expected.join(' or ')}`);
  const started = Date.now();
  await runLoad({
    url,
    connections: settings.connections,
    durationSeconds: 0,
    amount: settings.warmupRequests,
    headers,
    timeoutSeconds: 300,
  });
  await settle(500);
  const pids = countedPids(child, row.tree);
  process.stdout.write(
    `  ${row.id}: warmed up (${settings.warmupRequests} requests, ${((Date.now() - started) / 1000).toFixed(0)} s), counting ${pids.length} process(es)\n`,
  );
  for (const pid of pids) await callgrindControl(['-i', 'on'], pid);
  // Instrumentation on throws away valgrind's translations: the first requests after it crawl while
  // the code is translated again. Uncounted, so that no counted request waits that long. A full GC
  // first: the first one after the warm-up has the warm-up's garbage to sweep and the major cycle
  // it restarts lands in the next requests; these take it, not the first counted repeat.
  await collectGarbage(pids, dir);
  await runLoad({
    url,
    connections: settings.connections,
    durationSeconds: 0,
    amount: Math.max(200, Math.round(settings.requests / 5)),
    headers,
    timeoutSeconds: 300,
  });
  const repeats: CountedRepeat[] = [];
  const steps: Array<Record<string, number>> = [];
  for (let r = 0; r < settings.repeats; r++) {
    // Read outside the counted span: the scrape's own work and garbage stay out of the repeat.
    const leasedBefore = await leaseAdmissions(child);
    await collectGarbage(pids, dir);
    for (const pid of pids) await callgrindControl(['-z'], pid);
    const load = await runLoad({
      url,
      connections: settings.connections,
      durationSeconds: 0,
      amount: settings.requests,
      headers,
      timeoutSeconds: 300,
    });
    // The last answers' log lines and writes finish on the server after the client has them.
    await settle(500);
    const byProcess: Record<string, number> = {};
    const dumps: Record<string, string> = {};
    for (const pid of pids) {
      await callgrindControl(['-d'], pid);
      dumps[pid] = newestDump(dir, row.id, pid);
      byProcess[pid] = callgrindTotals(fs.readFileSync(dumps[pid]!, 'utf8'));
    }
    const instructions = Object.values(byProcess).reduce((a, b) => a + b, 0);
    const repeat = {
      requests: load.requests,
      errors: load.errors + load.requests - expected.reduce((sum, status) => sum + (load.statuses[status] ?? 0), 0),
      byProcess,
      instructions,
      dumps,
      fromLease: leaseShare(leasedBefore, await leaseAdmissions(child), load),
      requestsPerSecond: load.requestsPerSecond,
    };
    repeats.push(repeat);
    if (row.steps) {
      // A tree's processes, each named by its own perf map, summed step by step.
      const summed: Record<string, number> = {};
      for (const pid of pids)
        for (const [step, value] of Object.entries(stepTable(dumps[pid]!, pid, load.requests)))
          summed[step] = (summed[step] ?? 0) + value;
      steps.push(summed);
    }
    process.stdout.write(
      `  ${row.id}: repeat ${r + 1}/${settings.repeats}: ${(instructions / load.requests / 1000).toFixed(1)} k instructions/request, ${load.requestsPerSecond.toFixed(0)} req/s` +
        `${Number.isNaN(repeat.fromLease) ? '' : `, ${share(repeat.fromLease)} from leases`}${repeat.errors ? ` (${repeat.errors} not 200)` : ''}\n`,
    );
  }
  await child.stop();
  for (const pid of pids) {
    // BENCH_KEEP_CALLGRIND=DIR: the last dumps and perf maps kept, for callgrind_annotate by hand.
    if (process.env.BENCH_KEEP_CALLGRIND) {
      fs.mkdirSync(process.env.BENCH_KEEP_CALLGRIND, { recursive: true });
      fs.copyFileSync(
        repeats[repeats.length - 1]!.dumps[pid]!,
        path.join(process.env.BENCH_KEEP_CALLGRIND, path.basename(repeats[repeats.length - 1]!.dumps[pid]!)),
      );
      if (fs.existsSync(`/tmp/perf-${pid}.map`))
        fs.copyFileSync(`/tmp/perf-${pid}.map`, path.join(process.env.BENCH_KEEP_CALLGRIND, `perf-${pid}.map`));
    }
    fs.rmSync(`/tmp/perf-${pid}.map`, { force: true });
  }
  return { id: row.id, label: row.label, repeats, steps };
}

interface CpuRounds {
  /** CPU µs per request, one a round. */
  perRequest: Map<string, number[]>;
  /** Share of each round's admitted requests decided from a lease (NaN: the server does not say). */
  fromLease: Map<string, number[]>;
}

/** CPU time per request outside valgrind: the same rows, rounds interleaved as in the main bench. */
async function cpuRows(chosen: InstructionRow[], settings: InstructionSettings): Promise<CpuRounds> {
  const children = new Map<string, BenchChild>();
  for (const row of chosen) children.set(row.id, await row.start(`${row.id}-cpu`, [], []));
  const perRequest = new Map<string, number[]>(chosen.map((r) => [r.id, []]));
  const fromLease = new Map<string, number[]>(chosen.map((r) => [r.id, []]));
  for (const row of chosen) {
    const child = children.get(row.id)!;
    const headers = headersOf(row, child);
    await runLoad({
      url: `${child.url}/v1/pets`,
      connections: settings.connections,
      durationSeconds: 0,
      amount: settings.warmupRequests,
      headers,
    });
  }
  for (let round = 0; round < settings.repeats; round++) {
    for (let i = 0; i < chosen.length; i++) {
      const row = chosen[(i + round) % chosen.length]!;
      const child = children.get(row.id)!;
      const headers = headersOf(row, child);
      const leasedBefore = await leaseAdmissions(child);
      await settle(200);
      const before = child.cpuMs();
      const load = await runLoad({
        url: `${child.url}/v1/pets`,
        connections: settings.connections,
        durationSeconds: 0,
        amount: settings.cpuRequests,
        headers,
      });
      await settle(200);
      perRequest.get(row.id)!.push(((child.cpuMs() - before) * 1000) / load.requests);
      fromLease.get(row.id)!.push(leaseShare(leasedBefore, await leaseAdmissions(child), load));
    }
  }
  for (const child of children.values()) await child.stop();
  return { perRequest, fromLease };
}

export interface InstructionReport {
  startedAt: string;
  finishedAt: string;
  settings: Omit<InstructionSettings, 'only'>;
  node: string;
  loadAverage: { before: number[]; after: number[] };
  rows: Array<{
    id: string;
    label: string;
    /** Instructions per request of each repeat, their median and spread ((max − min) ÷ median, %). */
    perRepeat: number[];
    median: number;
    spreadPercent: number;
    /** Each process's instructions per request (a tree: supervisor first), median over the repeats. */
    perProcess: number[];
    /**
     * Without V8's compilers (the per-step table's row): JIT compilation still under way after the
     * warm-up lands in one repeat or another; what is left is the request path's own work and GC.
     */
    withoutCompilers: number[];
    withoutCompilersMedian: number;
    withoutCompilersSpreadPercent: number;
    errors: number;
    cpuMicrosPerRound: number[];
    cpuMicros: number;
    cpuSpreadPercent: number;
    /** Issue 50: share of admitted requests decided from a lease, per repeat and per CPU round (null: the server does not say). */
    fromLeasePerRepeat: Array<number | null>;
    fromLeasePerCpuRound: Array<number | null>;
    /** Requests per second each repeat reached under valgrind. */
    requestsPerSecondPerRepeat: number[];
    /** Per repeat, less V8's compilers and its garbage collector: a major GC lands in one repeat or another. */
    withoutCompilersAndCollector: number[];
  }>;
  /** Per-step instructions per request (median over repeats) and each step's spread, by row id. */
  steps: Record<string, Record<string, { median: number; spreadPercent: number }>>;
}

const nullIfNaN = (n: number) => (Number.isNaN(n) ? null : n);

function summarize(counted: CountedRow[], cpu: CpuRounds): Pick<InstructionReport, 'rows' | 'steps'> {
  const reportRows = counted.map((row) => {
    const perRepeat = row.repeats.map((r) => r.instructions / r.requests);
    const processCount = Math.min(...row.repeats.map((r) => Object.keys(r.byProcess).length));
    const perProcess = Array.from({ length: processCount }, (_, i) =>
      median(row.repeats.map((r) => Object.values(r.byProcess)[i]! / r.requests)),
    );
    const cpuMicrosPerRound = cpu.perRequest.get(row.id) ?? [];
    const withoutCompilers =
      row.steps.length === perRepeat.length ? perRepeat.map((total, i) => total - (row.steps[i]![COMPILERS] ?? 0)) : [];
    const requestPath = withoutCompilers.map((total, i) => total - (row.steps[i]![GARBAGE_COLLECTOR] ?? 0));
    return {
      withoutCompilers,
      withoutCompilersMedian: withoutCompilers.length ? median(withoutCompilers) : NaN,
      withoutCompilersSpreadPercent: spreadPercent(withoutCompilers),
      id: row.id,
      label: row.label,
      perRepeat,
      median: median(perRepeat),
      spreadPercent: spreadPercent(perRepeat),
      perProcess,
      errors: row.repeats.reduce((sum, r) => sum + r.errors, 0),
      cpuMicrosPerRound,
      cpuMicros: cpuMicrosPerRound.length ? median(cpuMicrosPerRound) : NaN,
      cpuSpreadPercent: spreadPercent(cpuMicrosPerRound),
      withoutCompilersAndCollector: requestPath,
      fromLeasePerRepeat: row.repeats.map((r) => nullIfNaN(r.fromLease)),
      fromLeasePerCpuRound: (cpu.fromLease.get(row.id) ?? []).map(nullIfNaN),
      requestsPerSecondPerRepeat: row.repeats.map((r) => r.requestsPerSecond),
    };
  });
  const steps: InstructionReport['steps'] = {};
  for (const row of counted.filter((r) => r.steps.length > 0)) {
    steps[row.id] = {};
    for (const step of new Set(row.steps.flatMap((s) => Object.keys(s)))) {
      const values = row.steps.map((s) => s[step] ?? 0);
      steps[row.id]![step] = { median: median(values), spreadPercent: spreadPercent(values) };
    }
  }
  return { rows: reportRows, steps };
}

const COMPILERS = STEP_ROWS[19];
const GARBAGE_COLLECTOR = STEP_ROWS[18];

const k = (n: number) => (Number.isFinite(n) ? `${(n / 1000).toFixed(1)} k` : '–');
const pct = (n: number) => (Number.isFinite(n) ? `${n.toFixed(1)} %` : '–');
const share = (n: number | null) => (n !== null && Number.isFinite(n) ? `${(n * 100).toFixed(1)} %` : '–');

/** Rows whose server counts lease admissions: the share of admitted requests a lease decided (the rest Redis did). */
function leaseShareLines(report: InstructionReport): string[] {
  const told = report.rows.filter((row) =>
    [...row.fromLeasePerRepeat, ...row.fromLeasePerCpuRound].some((s) => s !== null),
  );
  if (told.length === 0) return [];
  return [
    '',
    'Admitted requests decided from a lease (gateway_lease_admissions_total{decided_by="lease"} ÷ 200s; the rest by Redis):',
    '',
    ...told.map(
      (row) =>
        `- ${row.id}: per repeat under valgrind ${row.fromLeasePerRepeat.map(share).join(', ')} ` +
        `(at ${row.requestsPerSecondPerRepeat.map((r) => r.toFixed(0)).join(', ')} req/s); per CPU round ${row.fromLeasePerCpuRound.map(share).join(', ')}`,
    ),
  ];
}

/** The report as Markdown: the rows, the targets in instructions, the per-step table. */
export function instructionMarkdown(report: InstructionReport): string {
  const lines: string[] = [];
  const { settings } = report;
  lines.push(
    `Instructions per request (callgrind), ${settings.requests} counted requests a repeat after ${settings.warmupRequests} warm-up, ` +
      `${settings.connections} connections, ${settings.repeats} repeats; CPU time outside valgrind, ${settings.cpuRequests} requests a round. ` +
      `Node ${report.node}, load average ${report.loadAverage.before.map((l) => l.toFixed(1)).join(' ')} before, ${report.loadAverage.after.map((l) => l.toFixed(1)).join(' ')} after.`,
    '',
    '| row | instructions/req (median) | repeats | spread | without V8 compilers | spread | per process | CPU µs/req (median) | CPU spread |',
    '|---|---:|---|---:|---:|---:|---|---:|---:|',
  );
  for (const row of report.rows) {
    lines.push(
      `| ${row.label}${row.errors ? ` (${row.errors} not 200)` : ''} | ${k(row.median)} | ${row.perRepeat.map(k).join(', ')} | ${pct(row.spreadPercent)} | ${k(row.withoutCompilersMedian)} | ${pct(row.withoutCompilersSpreadPercent)} | ${row.perProcess.length > 1 ? row.perProcess.map(k).join(' + ') : ''} | ${row.cpuMicros.toFixed(1)} | ${pct(row.cpuSpreadPercent)} |`,
    );
  }
  const byId = new Map(report.rows.map((r) => [r.id, r]));
  const ratio = (a: string, b: string, limit: number) => {
    const x = byId.get(a);
    const y = byId.get(b);
    if (!x || !y) return null;
    const paired = x.perRepeat.map((v, i) => v / y.perRepeat[i]!);
    // Decided only when both rows' repeats agree within the target's margin (verdict.ts, as the CPU rows are).
    const judge = (ratio: number, spreads: number[]) =>
      verdictText(judgeRatio({ ratio, limit, spreadsPercent: spreads }));
    const withoutCompilers = x.withoutCompilersMedian / y.withoutCompilersMedian;
    return {
      instructions: x.median / y.median,
      paired,
      everyRepeat: paired.every((p) => p <= limit),
      cpu: x.cpuMicros / y.cpuMicros,
      cpuPaired: pairedRatios(x.cpuMicrosPerRound, y.cpuMicrosPerRound),
      pathPaired: pairedRatios(x.withoutCompilersAndCollector, y.withoutCompilersAndCollector),
      withoutCompilers,
      verdict: judge(x.median / y.median, [x.spreadPercent, y.spreadPercent]),
      withoutCompilersVerdict: judge(withoutCompilers, [
        x.withoutCompilersSpreadPercent,
        y.withoutCompilersSpreadPercent,
      ]),
    };
  };
  lines.push('');
  for (const [a, b, what, limit] of [
    [GATEWAY, PEER, 'gateway / fastify peer', 0.9],
    [TWO_WORKERS, ONE_WORKER, 'WORKERS=2 / WORKERS=1', 1.05],
    [GATEWAY, OTHER_BUILD, 'gateway / its --compare-with build', 1],
    [REFUSED_429, GATEWAY, '429 rate_limited / admitted', 0.3],
    [REFUSED_401, GATEWAY, '401 made-up key / admitted', 0.3],
    // Issue 50's last "done when": gateway CPU per request for the hot key ≤ 0.85× the per-request row, paired per round.
    [LEASES_ON, LEASES_OFF, 'leases on / leases off (hot key)', 0.85],
  ] as const) {
    const r = ratio(a, b, limit);
    if (!r) continue;
    lines.push(
      `- ${what}, target ≤ ${limit}×: ${r.instructions.toFixed(3)}× in instructions (paired by repeat ${r.paired.map((p) => p.toFixed(3)).join(' ')}, ` +
        `${r.everyRepeat ? 'each' : 'not each'} ≤ ${limit}): ${r.verdict}; ` +
        `${Number.isFinite(r.withoutCompilers) ? `${r.withoutCompilers.toFixed(3)}× without V8's compilers: ${r.withoutCompilersVerdict}; ` : ''}` +
        `${r.pathPaired.length ? `without the compilers and the collector, paired by repeat ${r.pathPaired.map((p) => p.toFixed(3)).join(' ')}; ` : ''}` +
        `${r.cpu.toFixed(2)}× in CPU time (paired by round ${r.cpuPaired.map((p) => p.toFixed(2)).join(' ')})`,
    );
  }
  lines.push(...leaseShareLines(report));
  const stepIds = Object.keys(report.steps);
  if (stepIds.length > 0) {
    lines.push(
      '',
      'Per step, instructions per request (median of the repeats; spread in brackets):',
      '',
      `| step | ${stepIds.join(' | ')} |`,
      `|---|${stepIds.map(() => '---:').join('|')}|`,
    );
    const named = [
      ...STEP_ROWS,
      ...new Set(
        stepIds
          .flatMap((id) => Object.keys(report.steps[id]!))
          .filter((s) => !(STEP_ROWS as readonly string[]).includes(s)),
      ),
    ];
    for (const step of named) {
      const cells = stepIds.map((id) => report.steps[id]![step]);
      if (cells.every((c) => !c || c.median < 50)) continue;
      lines.push(
        `| ${step} | ${cells.map((c) => (c ? `${k(c.median)} (${pct(c.spreadPercent)})` : '–')).join(' | ')} |`,
      );
    }
    const totals = stepIds.map((id) => byId.get(id)!.median);
    lines.push(`| total | ${totals.map(k).join(' | ')} |`);
  }
  return lines.join('\n') + '\n';
}

/** The whole --instructions run: every chosen row counted under callgrind at once, then CPU time, then the report. */
export async function measureInstructions(
  settings: InstructionSettings,
  fixture: Fixture,
  repoRoot: string,
): Promise<void> {
  const startedAt = new Date();
  const loadBefore = os.loadavg();
  const all = rows(fixture, repoRoot, settings.compareWith ?? null);
  const chosen = settings.only ? all.filter((r) => settings.only!.includes(r.id)) : all;
  if (chosen.length === 0)
    throw new Error(
      `--only: no instruction row among ${settings.only!.join(', ')} (rows: ${all.map((r) => r.id).join(', ')})`,
    );
  const dir = path.join(fixture.workDir, 'callgrind');
  fs.mkdirSync(dir);
  // Read by children/gc-on-signal.ts in every counted process (the npm start rows pass their env on).
  process.env.BENCH_GC_DIR = dir;
  process.stdout.write(
    `instructions: ${chosen.length} rows under callgrind at once, ${settings.warmupRequests} warm-up then ${settings.repeats} x ${settings.requests} counted requests, ${settings.connections} connections; load average ${loadBefore.map((l) => l.toFixed(2)).join(' ')}\n`,
  );
  // The rows run side by side: instruction counts do not depend on what else runs, and valgrind is slow.
  const started: BenchChild[] = [];
  for (const row of chosen) {
    started.push(await startCounted(row, dir));
    process.stdout.write(`  ${row.id}: started under valgrind\n`);
  }
  const counted = await Promise.all(chosen.map((row, i) => countRow(row, started[i]!, settings, dir)));
  process.stdout.write('CPU time outside valgrind\n');
  const cpu = await cpuRows(chosen, settings);
  const report: InstructionReport = {
    startedAt: startedAt.toISOString(),
    finishedAt: new Date().toISOString(),
    settings: {
      requests: settings.requests,
      warmupRequests: settings.warmupRequests,
      repeats: settings.repeats,
      connections: settings.connections,
      cpuRequests: settings.cpuRequests,
    },
    node: process.version,
    loadAverage: { before: loadBefore, after: os.loadavg() },
    ...summarize(counted, cpu),
  };
  const markdown = instructionMarkdown(report);
  process.stdout.write(`\n${markdown}`);
  const results = path.join(repoRoot, 'bench', 'results');
  fs.writeFileSync(
    path.join(results, 'instructions.json'),
    JSON.stringify(
      report,
      (_key, value: unknown) => (typeof value === 'number' && !Number.isFinite(value) ? null : value),
      2,
    ) + '\n',
  );
  fs.writeFileSync(path.join(results, 'instructions.md'), markdown);
  process.stdout.write(`wrote bench/results/instructions.{json,md}\n`);
}
