import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort } from '../../support/redis-server';

/**
 * The real entry point, `node -r ./test/support/ts-register.js src/main.ts`, as a child process
 * with only the environment a test gives it (plus PATH): nothing of the test runner's environment
 * (REDIS_URL, ADMIN_TOKEN, …) leaks in.
 */

const REPO_ROOT = path.resolve(__dirname, '..', '..', '..');

/**
 * How long a wait for a start (or a refusal) may take before the test gives up: a hang guard, not a
 * claim about speed. A start takes 2-5 s on a quiet machine and took over 20 s on a crowded one
 * (load average 12, a busy core beside it); the wait ends as soon as the line comes or the process
 * exits, so a generous guard costs nothing when all is well.
 */
export const START_HANG_GUARD_MS = 150_000;

export interface MainProcess {
  child: ChildProcess;
  stdout(): string;
  stderr(): string;
  /** Resolves with the exit code (null when killed by a signal). */
  exited: Promise<number | null>;
  /** Waits until stdout matches `pattern`; fails if the process exits first or after `timeoutMs`. */
  waitForStdout(pattern: RegExp, timeoutMs?: number): Promise<RegExpMatchArray>;
}

/** `prefix`: a command to run the entry point under, e.g. `['taskset', '-c', '0']`; `nodeArgs`: more options for node. */
export function startMain(
  env: Record<string, string>,
  { prefix = [], nodeArgs = [] }: { prefix?: string[]; nodeArgs?: string[] } = {},
): MainProcess {
  const command = [...prefix, process.execPath, ...nodeArgs, '-r', './test/support/ts-register.js', 'src/main.ts'];
  const child = spawn(command[0]!, command.slice(1), {
    cwd: REPO_ROOT,
    env: { PATH: process.env.PATH ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  const listeners = new Set<() => void>();
  child.stdout!.on('data', (chunk: Buffer) => {
    stdout += chunk.toString('utf8');
    for (const listener of listeners) listener();
  });
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
  const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
  // Never outlive the test run, whatever happens to the test (longer than any test's own timeout).
  const guard = setTimeout(() => child.kill('SIGKILL'), 600_000);
  void exited.then(() => clearTimeout(guard));

  return {
    child,
    stdout: () => stdout,
    stderr: () => stderr,
    exited,
    waitForStdout(pattern, timeoutMs = START_HANG_GUARD_MS) {
      return new Promise((resolve, reject) => {
        const check = () => {
          const match = stdout.match(pattern);
          if (!match) return;
          done();
          resolve(match);
        };
        const timer = setTimeout(() => {
          done();
          reject(new Error(`stdout did not match ${pattern} within ${timeoutMs} ms:\n${stdout}\nstderr:\n${stderr}`));
        }, timeoutMs);
        const done = () => {
          clearTimeout(timer);
          listeners.delete(check);
        };
        listeners.add(check);
        void exited.then((code) => {
          if (!listeners.has(check)) return;
          done();
          reject(new Error(`exited with ${code} before stdout matched ${pattern}:\n${stdout}\nstderr:\n${stderr}`));
        });
        check();
      });
    },
  };
}

/** Runs the entry point to its end (bounded), for settings that must stop it. */
export async function runMain(
  env: Record<string, string>,
  timeoutMs = START_HANG_GUARD_MS,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const main = startMain(env);
  const timer = setTimeout(() => main.child.kill('SIGKILL'), timeoutMs);
  const code = await main.exited;
  clearTimeout(timer);
  return { code, stdout: main.stdout(), stderr: main.stderr() };
}

/** A private data dir and free ports, so a start that should have been refused harms nothing. */
export async function isolatedEnv(extra: Record<string, string> = {}): Promise<Record<string, string>> {
  return {
    DATA_DIR: fs.mkdtempSync(path.join(os.tmpdir(), 'asg-startup-')),
    PORT: String(await freePort()),
    ADMIN_PORT: String(await freePort()),
    INVENTORY_PORT: String(await freePort()),
    ...extra,
  };
}

/** A file in a fresh temp dir. */
export function tempFile(name: string, content: string): string {
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'asg-config-')), name);
  fs.writeFileSync(file, content);
  return file;
}

export const LONG_ADMIN_TOKEN = 'startup-admin-token-0123456789abcdef-long-enough';
export const LONG_SIGNING_SECRET = 'startup-signing-secret-0123456789abcdef-long-enough';

/** `npm start` as production runs it with two workers on `redisUrl`, on free ports and a fresh DATA_DIR; `extra` adds or overrides. */
export function twoWorkersEnv(redisUrl: string, extra: Record<string, string>): Promise<Record<string, string>> {
  return isolatedEnv({
    APP_ENV: 'staging',
    ADMIN_TOKEN: LONG_ADMIN_TOKEN,
    SIGNING_SECRET: LONG_SIGNING_SECRET,
    REDIS_URL: redisUrl,
    WORKERS: '2',
    ...extra,
  });
}
