import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { eventually } from '../../support/eventually';
import { freePort } from '../../support/redis-server';

/** Debian's nginx-light (.ci/run installs it). */
export const NGINX_BINARY = '/usr/sbin/nginx';

const DOCS_PAGE = path.join(__dirname, '../../../docs/external-auth.md');

/** Where the docs' configuration names the parts it stands between, and what the test puts there. */
export interface NginxTargets {
  gateway1: { authz: string; public: string };
  gateway2: { authz: string; public: string };
  inventory: string;
}

/**
 * The NGINX configuration of docs/external-auth.md, exactly, but for the addresses: the first
 * ```nginx block of the page, each placeholder replaced (each must be there: a page that drifted
 * from what the test runs fails here).
 */
export function docsNginxConfig(targets: NginxTargets, port: number): string {
  const page = fs.readFileSync(DOCS_PAGE, 'utf8');
  const block = /```nginx\n([\s\S]*?)```/.exec(page);
  if (!block) throw new Error(`${DOCS_PAGE} has no nginx block`);
  let config = block[1]!;
  const replacements: Array<[string, string]> = [
    ['server gateway-1:8082;', `server ${hostPort(targets.gateway1.authz)};`],
    ['server gateway-2:8082;', `server ${hostPort(targets.gateway2.authz)};`],
    ['server gateway-1:8080;', `server ${hostPort(targets.gateway1.public)};`],
    ['server gateway-2:8080;', `server ${hostPort(targets.gateway2.public)};`],
    ['server inventory:8090;', `server ${hostPort(targets.inventory)};`],
    ['listen 8000;', `listen 127.0.0.1:${port};`],
  ];
  for (const [placeholder, actual] of replacements) {
    if (!config.includes(placeholder)) throw new Error(`the docs' nginx configuration no longer has "${placeholder}"`);
    config = config.split(placeholder).join(actual);
  }
  return config;
}

function hostPort(url: string): string {
  return new URL(url).host;
}

export interface RunningNginx {
  url: string;
  /** NGINX's error log, for a failure message. */
  errorLog(): string;
  stop(): Promise<void>;
}

/**
 * Starts NGINX in the foreground on a free loopback port with `config`, everything of its own
 * (config, pid, error log) in a temporary directory. Fails loudly when NGINX is not installed.
 */
export async function startNginx(configFor: (port: number) => string): Promise<RunningNginx> {
  if (!fs.existsSync(NGINX_BINARY)) {
    throw new Error(`NGINX is not installed (${NGINX_BINARY}): apt-get install nginx-light (.ci/run installs it)`);
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'asg-nginx-'));
  const port = await freePort();
  const configFile = path.join(dir, 'nginx.conf');
  fs.writeFileSync(configFile, configFor(port));
  const errorLogFile = path.join(dir, 'error.log');
  const errorLog = () => (fs.existsSync(errorLogFile) ? fs.readFileSync(errorLogFile, 'utf8') : '');
  const child = spawn(
    NGINX_BINARY,
    ['-p', dir, '-c', configFile, '-e', errorLogFile, '-g', `daemon off; pid ${path.join(dir, 'nginx.pid')};`],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
  const url = `http://127.0.0.1:${port}`;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  await eventually(
    async () => {
      if (child.exitCode !== null) throw new Error(`nginx exited with ${child.exitCode}: ${stderr}${errorLog()}`);
      return fetch(`${url}/`).then(
        () => true,
        () => false,
      );
    },
    { timeoutMs: 30_000, what: () => `nginx answering on ${url} (${stderr}${errorLog()})` },
  );
  return {
    url,
    errorLog,
    stop: async () => {
      await stopChild(child, exited);
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** SIGQUIT is NGINX's graceful stop; the master waits for its worker. */
async function stopChild(child: ChildProcess, exited: Promise<void>): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill('SIGQUIT');
  await exited;
}
