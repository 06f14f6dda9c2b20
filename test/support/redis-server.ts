import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import net from 'node:net';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { eventually } from './eventually';

export interface RedisProcess {
  url: string;
  port: number;
  /** The redis-server process (the bench reads its CPU time). */
  pid: number;
  dir: string;
  stop(): Promise<void>;
}

const INSTALL_HINT =
  'redis-server is not on PATH and REDIS_URL is not set. Install it (Debian: `apt-get install redis-server`) ' +
  'or point REDIS_URL at a Redis the tests may use.';

export function assertRedisServerAvailable(): void {
  const probe = spawnSync('redis-server', ['--version'], { encoding: 'utf8' });
  if (probe.error || probe.status !== 0) throw new Error(INSTALL_HINT);
}

/**
 * A port nothing listens on, drawn below Linux's ephemeral range (32768-60999) so that the client
 * sockets of a busy test run (which take their source ports from that range) cannot grab it between
 * this check and the server's own listen. Checked on 0.0.0.0, which the product binds by default.
 */
export async function freePort(): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const candidate = 20_000 + Math.floor(Math.random() * 12_000);
    const free = await new Promise<boolean>((resolve) => {
      const server = net.createServer();
      server.unref();
      server.once('error', () => resolve(false));
      server.listen(candidate, '0.0.0.0', () => server.close(() => resolve(true)));
    });
    if (free) return candidate;
  }
  throw new Error('no free port found in 20000-31999');
}

/** One PING over a raw socket: true once the server answers (a server with a password answers NOAUTH: up all the same). */
function answersPing(port: number): Promise<boolean> {
  return new Promise<boolean>((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.once('connect', () => socket.write('PING\r\n'));
    socket.once('data', (chunk) => {
      socket.destroy();
      resolve(/^(\+PONG|-NOAUTH)/.test(chunk.toString()));
    });
    socket.once('error', () => resolve(false));
  });
}

/** How long a redis-server may take to answer its first PING: a hang guard, not a speed claim. */
const REDIS_START_HANG_GUARD_MS = 60_000;

/** Starts a private redis-server on a free loopback port. Never touches the machine's shared Redis. */
export async function startRedisServer(extraArgs: string[] = [], port?: number): Promise<RedisProcess> {
  assertRedisServerAvailable();
  const chosenPort = port ?? (await freePort());
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'asg-redis-'));
  const child: ChildProcess = spawn(
    'redis-server',
    [
      '--port',
      String(chosenPort),
      '--bind',
      '127.0.0.1',
      '--save',
      '',
      '--appendonly',
      'no',
      '--dir',
      dir,
      ...extraArgs,
    ],
    { stdio: 'ignore', detached: false },
  );
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  // A hang guard (docs/testing.md): a crowded machine starts a process slowly, and it costs nothing when all is well.
  await eventually(() => answersPing(chosenPort), {
    timeoutMs: REDIS_START_HANG_GUARD_MS,
    pollMs: 25,
    what: `redis-server on port ${chosenPort} answering PING`,
  });
  return {
    url: `redis://127.0.0.1:${chosenPort}`,
    port: chosenPort,
    pid: child.pid!,
    dir,
    async stop() {
      if (child.exitCode === null) child.kill('SIGKILL');
      await exited;
    },
  };
}
