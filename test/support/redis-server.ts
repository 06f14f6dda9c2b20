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

/** What redis-server logs once it listens on every port it was given and has loaded its data. */
export const READY_LINE = 'Ready to accept connections';

/**
 * A redis-server that exited at start because a port it was given was taken: freePort's check and
 * the server's own listen are two steps, and another jest worker may take the port between them.
 */
export class RedisPortTakenError extends Error {}

/**
 * `start` again, on ports it draws anew each time, while it fails with RedisPortTakenError (three
 * tries in all): the kit's one answer to a port taken between its draw and the server's listen.
 */
export async function drawingPortsAgain<T>(start: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await start();
    } catch (err) {
      if (!(err instanceof RedisPortTakenError) || attempt === 3) throw err;
    }
  }
}

/**
 * redis-server (a server or a sentinel) with its output in `logPath`, a file of this start only:
 * why it exited at start (exitedAtStart), or its ready line, which tells it apart from another
 * process answering PING on the same port.
 */
export function spawnLoggedRedis(args: string[], logPath: string): ChildProcess {
  const logFd = fs.openSync(logPath, 'w');
  try {
    return spawn('redis-server', args, { stdio: ['ignore', logFd, logFd] });
  } finally {
    fs.closeSync(logFd);
  }
}

/** The failure of a spawnLoggedRedis process that has exited, with its log (RedisPortTakenError for a taken port); null while it runs. */
export function exitedAtStart(child: ChildProcess, logPath: string, what: string): Error | null {
  if (child.exitCode === null && child.signalCode === null) return null;
  const said = fs.readFileSync(logPath, 'utf8').slice(-2000);
  const message = `${what} exited at start (${child.exitCode ?? child.signalCode}):\n${said}`;
  return /Address already in use/.test(said) ? new RedisPortTakenError(message) : new Error(message);
}

/**
 * Starts a private redis-server on a free loopback port. Never touches the machine's shared Redis.
 * With `port` given, a taken port fails with RedisPortTakenError; with a drawn one, another is drawn.
 */
export async function startRedisServer(extraArgs: string[] = [], port?: number): Promise<RedisProcess> {
  assertRedisServerAvailable();
  if (port !== undefined) return spawnRedisServer(extraArgs, port);
  return drawingPortsAgain(async () => spawnRedisServer(extraArgs, await freePort()));
}

async function spawnRedisServer(extraArgs: string[], chosenPort: number): Promise<RedisProcess> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'asg-redis-'));
  const logPath = path.join(dir, 'redis-server.log');
  const child = spawnLoggedRedis(
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
    logPath,
  );
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const log = () => fs.readFileSync(logPath, 'utf8');
  const what = `redis-server on port ${chosenPort}`;
  // A hang guard (docs/testing.md): a crowded machine starts a process slowly, and it costs nothing when all is well.
  await eventually(
    async () => {
      const failure = exitedAtStart(child, logPath, what);
      if (failure) throw failure;
      return log().includes(READY_LINE) && (await answersPing(chosenPort));
    },
    {
      timeoutMs: REDIS_START_HANG_GUARD_MS,
      pollMs: 25,
      what: () => `${what} ready and answering PING; its log:\n${log().slice(-2000)}`,
    },
  );
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
