import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { MODERN_CIPHERS } from '../src/shared/http/secure-server';
import { freePort } from '../test/support/redis-server';
import type { BenchChild } from './processes';
import { treeBytes, treeCpuMs } from './processes';

/**
 * Servers the bench starts that are not its own children scripts: nginx (the reference proxy) and
 * the gateway as `npm start` runs it with WORKERS (a supervisor and its workers). Each is measured
 * as a process tree: CPU and RSS of the master or supervisor and every process under it.
 */

/** Whether nginx is installed (Debian: `apt-get install nginx-light`); the bench installs nothing. */
export function nginxAvailable(): boolean {
  return !spawnSync('nginx', ['-v']).error;
}

function treeChild(
  name: string,
  child: ChildProcess,
  url: string,
  details: Record<string, string>,
  stopSignal: NodeJS.Signals,
): BenchChild {
  const pid = child.pid!;
  const exited = new Promise<void>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve();
    else child.once('exit', () => resolve());
  });
  return {
    name,
    pid,
    url,
    details,
    stats: async () => ({ redisCommandsSent: null, requestsReceived: null, rssBytes: treeBytes(pid, 'VmRSS') }),
    peakRssBytes: () => treeBytes(pid, 'VmHWM'),
    rssBytes: () => treeBytes(pid, 'VmRSS'),
    cpuMs: () => treeCpuMs(pid),
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill(stopSignal);
      const killer = setTimeout(() => child.kill('SIGKILL'), 15_000);
      await exited;
      clearTimeout(killer);
    },
  };
}

async function waitUntilServing(url: string, child: ChildProcess, what: string, timeoutMs = 30_000): Promise<void> {
  const startedAt = Date.now();
  for (;;) {
    if (child.exitCode !== null) throw new Error(`${what} exited (${child.exitCode}) before it served`);
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(1000) });
      await res.arrayBuffer();
      return;
    } catch {
      if (Date.now() - startedAt > timeoutMs) throw new Error(`${what} did not serve ${url} within ${timeoutMs} ms`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}

/**
 * nginx with `proxy_pass` to the upstream over a keep-alive pool: the plainest fast reverse proxy.
 * It writes an access log line per request, as the gateway writes its log line per request.
 */
export async function startNginx(
  name: string,
  workers: number,
  upstreamUrl: string,
  workDir: string,
  tls?: BenchTls,
): Promise<BenchChild> {
  const dir = path.join(workDir, name);
  fs.mkdirSync(dir, { recursive: true });
  // nginx's workers drop root privileges; they must be able to write their temp folders and logs.
  fs.chmodSync(dir, 0o777);
  const port = await freePort();
  const upstream = new URL(upstreamUrl);
  const conf = path.join(dir, 'nginx.conf');
  fs.writeFileSync(
    conf,
    `worker_processes ${workers};
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events { worker_connections 4096; }
http {
  access_log ${dir}/access.log;
  client_body_temp_path ${dir}/client_body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;
  keepalive_timeout 65s;
  keepalive_requests 1000000;
  upstream inventory {
    server ${upstream.host};
    keepalive 256;
  }
  server {
    listen 127.0.0.1:${port}${tls ? ' ssl http2' : ''};${tls ? nginxTls(tls) : ''}
    location / {
      proxy_pass http://inventory;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }
  }
}
`,
  );
  const child = spawn('nginx', ['-c', conf, '-p', dir, '-g', 'daemon off;'], {
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const url = `${tls ? 'https' : 'http'}://127.0.0.1:${port}`;
  if (tls) await waitUntilListening(port, child, name);
  else await waitUntilServing(`${url}/v1/pets`, child, name);
  return treeChild(name, child, url, {}, 'SIGQUIT');
}

/** A certificate and key for the TLS rows: the gateway and nginx serve the same pair. */
export interface BenchTls {
  certFile: string;
  keyFile: string;
}

/** The same protocol versions and suites as the gateway's listener (src/shared/http/secure-server.ts). */
function nginxTls(tls: BenchTls): string {
  return `
    ssl_certificate ${tls.certFile};
    ssl_certificate_key ${tls.keyFile};
    ssl_protocols TLSv1.2 TLSv1.3;
    ssl_ciphers ${MODERN_CIPHERS.split(':')
      .filter((c) => !c.startsWith('TLS_'))
      .join(':')};
    ssl_prefer_server_ciphers on;
    ssl_session_cache shared:SSL:10m;`;
}

/** A TLS listener with a test certificate: fetch would refuse it, so the bench waits for the port. */
async function waitUntilListening(port: number, child: ChildProcess, what: string, timeoutMs = 30_000): Promise<void> {
  const startedAt = Date.now();
  for (;;) {
    if (child.exitCode !== null) throw new Error(`${what} exited (${child.exitCode}) before it listened`);
    const open = await new Promise<boolean>((resolve) => {
      const socket = net.connect(port, '127.0.0.1', () => {
        socket.destroy();
        resolve(true);
      });
      socket.on('error', () => resolve(false));
    });
    if (open) return;
    if (Date.now() - startedAt > timeoutMs) throw new Error(`${what} did not listen on ${port} within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

export const ADMIN_TOKEN = 'bench-admin-token-that-is-long-enough-0123456789';

/**
 * The gateway as `npm start` runs it (dist/main.js), with WORKERS set: a supervisor and its workers
 * on the bench's Redis, in front of the bench's upstream. Its keys are made through the admin API.
 */
export async function startGatewayProcess(
  name: string,
  options: {
    repoRoot: string;
    workers: number;
    redisUrl: string;
    upstreamUrl: string;
    workDir: string;
    appEnv?: string;
    tls?: BenchTls;
    /** A command the gateway runs under (valgrind for --instructions), its node flags, and a CONFIG_FILE. */
    launcher?: string[];
    nodeFlags?: string[];
    configFile?: string;
    readyTimeoutMs?: number;
  },
): Promise<BenchChild> {
  const dataDir = path.join(options.workDir, name);
  fs.mkdirSync(dataDir, { recursive: true });
  const [port, adminPort] = [await freePort(), await freePort()];
  const log = fs.openSync(path.join(options.workDir, `${name}.log`), 'a');
  const command = [
    ...(options.launcher ?? []),
    process.execPath,
    ...(options.nodeFlags ?? []),
    path.join(options.repoRoot, 'dist', 'main.js'),
  ];
  const child = spawn(command[0]!, command.slice(1), {
    env: {
      PATH: process.env.PATH ?? '',
      APP_ENV: options.appEnv ?? 'staging',
      WORKERS: String(options.workers),
      PORT: String(port),
      ADMIN_PORT: String(adminPort),
      INVENTORY_URL: options.upstreamUrl,
      REDIS_URL: options.redisUrl,
      ADMIN_TOKEN,
      SIGNING_SECRET: 'bench-signing-secret-that-is-long-enough-0123456789',
      DATA_DIR: dataDir,
      LOG_LEVEL: 'info',
      ...(options.configFile ? { CONFIG_FILE: options.configFile } : {}),
      // --instructions: where children/gc-on-signal.ts (preloaded by nodeFlags) tells each full GC.
      ...(process.env.BENCH_GC_DIR ? { BENCH_GC_DIR: process.env.BENCH_GC_DIR } : {}),
      ...(options.tls ? { TLS_CERT_FILE: options.tls.certFile, TLS_KEY_FILE: options.tls.keyFile } : {}),
    },
    stdio: ['ignore', log, 'inherit'],
  });
  fs.closeSync(log);
  const url = `${options.tls ? 'https' : 'http'}://127.0.0.1:${port}`;
  await waitUntilServing(`http://127.0.0.1:${adminPort}/readyz`, child, name, options.readyTimeoutMs);
  const createKey = async (body: object) => {
    const res = await fetch(`http://127.0.0.1:${adminPort}/admin/keys`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    if (res.status !== 201) throw new Error(`${name}: creating a key answered ${res.status}`);
    return ((await res.json()) as { key: string }).key;
  };
  const admitted = await createKey({
    name: 'bench admitted',
    plan: 'enterprise',
    limits: { perMinute: 1_000_000_000, perDay: 1_000_000_000_000 },
  });
  return treeChild(name, child, url, { admitted, adminUrl: `http://127.0.0.1:${adminPort}` }, 'SIGTERM');
}
