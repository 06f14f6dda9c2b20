import { spawn, type ChildProcess } from 'node:child_process';
import diagnosticsChannel from 'node:diagnostics_channel';
import fs from 'node:fs';
import path from 'node:path';

/**
 * The bench's servers run in child processes of their own, so that each one's CPU and memory are
 * its own and not autocannon's. They talk to the bench over the IPC channel: `ready` once
 * listening, and an answer to every `stats` request.
 */

export interface ReadyMessage {
  type: 'ready';
  url: string;
  /** Whatever else the child wants the bench to know (API keys for the gateway). */
  details?: Record<string, string>;
}

export interface ChildStats {
  /** Commands this process sent to Redis since it started (every one is a round trip); null when it cannot count them. */
  redisCommandsSent: number | null;
  /**
   * HTTP requests this process began to handle since it started (node:http's own diagnostics
   * channel), those wrk cut off at the end of a run included; null when it does not count them.
   */
  requestsReceived: number | null;
  /** Key lookups this process sent to Redis (HGET on the key store); null (or absent, from an older build) when it does not count them. */
  keyLookupsSent?: number | null;
  rssBytes: number;
}

type StatsRequest = { type: 'stats'; id: number };
type StatsReply = { type: 'stats'; id: number; stats: ChildStats };

export interface BenchChild {
  name: string;
  pid: number;
  url: string;
  details: Record<string, string>;
  stats(): Promise<ChildStats>;
  /** Peak resident set size so far (VmHWM), from /proc: the kernel's own high-water mark. */
  peakRssBytes(): number;
  /** Current resident set size (VmRSS). */
  rssBytes(): number;
  /** CPU time this process has used so far, user and system, in ms. */
  cpuMs(): number;
  stop(): Promise<void>;
}

const isTypeScript = path.extname(__filename) === '.ts';

/** utime + stime of a process, from /proc/<pid>/stat (in clock ticks of 10 ms on Linux). */
export function processCpuMs(pid: number): number {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // fields[0] is the state (field 3 of stat), so utime (14) and stime (15) are at 11 and 12.
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

/** The pids of a process's children, grandchildren and so on (from /proc, each process's ppid). */
export function descendantPids(pid: number): number[] {
  const parentOf = new Map<number, number>();
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
      parentOf.set(Number(entry), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
    } catch {
      // gone meanwhile
    }
  }
  const found: number[] = [];
  const queue = [pid];
  while (queue.length > 0) {
    const parent = queue.shift()!;
    for (const [child, ppid] of parentOf) {
      if (ppid === parent) {
        found.push(child);
        queue.push(child);
      }
    }
  }
  return found;
}

/** CPU of a process and everything under it (nginx's workers, the gateway's supervisor and workers), in ms. */
export function treeCpuMs(pid: number): number {
  return [pid, ...descendantPids(pid)].reduce((sum, p) => {
    try {
      return sum + processCpuMs(p);
    } catch {
      return sum;
    }
  }, 0);
}

/** RSS (or its peak) of a process and everything under it. */
export function treeBytes(pid: number, field: 'VmHWM' | 'VmRSS'): number {
  return [pid, ...descendantPids(pid)].reduce((sum, p) => {
    try {
      return sum + procStatusBytes(p, field);
    } catch {
      return sum;
    }
  }, 0);
}

export function procStatusBytes(pid: number, field: 'VmHWM' | 'VmRSS'): number {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const match = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status);
  return match ? Number(match[1]) * 1024 : 0;
}

/**
 * Starts `children/<script>` with `options` as its one argument (JSON). Its stdout goes to
 * `stdoutFile` (the gateway's log lines) or nowhere.
 */
export async function startChild(
  name: string,
  script: string,
  options: object,
  stdoutFile?: string,
  nodeFlags: string[] = [],
  benchDir: string = __dirname,
  launcher: string[] = [],
): Promise<BenchChild> {
  // benchDir: another checkout's compiled bench (`--compare-with`), for an A/B row in the same run.
  const entry = path.join(benchDir, 'children', script + (isTypeScript ? '.ts' : '.js'));
  const execArgv = isTypeScript ? ['-r', path.resolve(__dirname, '..', 'test', 'support', 'ts-register.js')] : [];
  const stdout = stdoutFile ? fs.openSync(stdoutFile, 'a') : 'ignore';
  // launcher: a command the child runs under (valgrind for --instructions); its pid is then the child's.
  const command = [...launcher, process.execPath, ...execArgv, ...nodeFlags, entry, JSON.stringify(options)];
  const child: ChildProcess = spawn(command[0]!, command.slice(1), {
    stdio: ['ignore', stdout, 'inherit', 'ipc'],
  });
  if (typeof stdout === 'number') fs.closeSync(stdout);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));

  const ready = await new Promise<ReadyMessage>((resolve, reject) => {
    const onExit = (code: number | null) =>
      reject(new Error(`bench child ${name} exited (${code}) before it was ready`));
    child.once('exit', onExit);
    child.on('message', (message: ReadyMessage | StatsReply) => {
      if (message.type === 'ready') {
        child.off('exit', onExit);
        resolve(message);
      }
    });
  });

  let nextId = 1;
  const pending = new Map<number, (stats: ChildStats) => void>();
  child.on('message', (message: ReadyMessage | StatsReply) => {
    if (message.type === 'stats') pending.get(message.id)?.(message.stats);
  });
  const pid = child.pid!;
  return {
    name,
    pid,
    url: ready.url,
    details: ready.details ?? {},
    stats() {
      const id = nextId++;
      return new Promise((resolve) => {
        pending.set(id, resolve);
        child.send({ type: 'stats', id } satisfies StatsRequest);
      });
    },
    peakRssBytes: () => procStatusBytes(pid, 'VmHWM'),
    rssBytes: () => procStatusBytes(pid, 'VmRSS'),
    cpuMs: () => processCpuMs(pid),
    async stop() {
      if (child.exitCode === null) child.kill('SIGTERM');
      const killer = setTimeout(() => child.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(killer);
    },
  };
}

/** In a child: the options the bench passed. The bench going away (even killed) ends the child. */
export function childOptions<T>(): T {
  process.once('disconnect', () => process.exit(0));
  return JSON.parse(process.argv[2] ?? '{}') as T;
}

/**
 * In a child: count the requests node:http starts to handle, from node:http's diagnostics channel
 * (one subscriber, an increment a request): the denominator of round trips per request, exact
 * where wrk's count misses the requests still in flight when a run ends.
 */
export function countRequestsReceived(): () => number {
  let received = 0;
  diagnosticsChannel.subscribe('http.server.request.start', () => {
    received++;
  });
  return () => received;
}

/** In a child: tell the bench where it listens, answer stats requests, and exit on SIGTERM. */
export function announceReady(
  url: string,
  details: Record<string, string> = {},
  redisCommandsSent: () => number = () => 0,
  stop?: () => Promise<void>,
  requestsReceived?: () => number,
  keyLookupsSent?: () => number,
): void {
  process.on('message', (message: StatsRequest) => {
    if (message.type !== 'stats') return;
    const stats: ChildStats = {
      redisCommandsSent: redisCommandsSent(),
      requestsReceived: requestsReceived?.() ?? null,
      keyLookupsSent: keyLookupsSent?.() ?? null,
      rssBytes: process.memoryUsage.rss(),
    };
    process.send!({ type: 'stats', id: message.id, stats } satisfies StatsReply);
  });
  process.once('SIGTERM', () => {
    void (stop ? stop() : Promise.resolve()).finally(() => process.exit(0));
  });
  process.send!({ type: 'ready', url, details } satisfies ReadyMessage);
}
