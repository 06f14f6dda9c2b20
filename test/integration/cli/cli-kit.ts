import { spawn } from 'node:child_process';
import path from 'node:path';
import { START_HANG_GUARD_MS } from '../startup/startup-kit';

/** Runs the key CLI as a real child process, as `npm run keys -- …` does, without a build step. */

const REPO_ROOT = path.resolve(__dirname, '..', '..', '..');

export interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * `node -r ./test/support/ts-register.js src/cli/main.ts <args>` with only the environment given
 * (plus PATH), so nothing of the test runner's environment (ADMIN_TOKEN, DATA_DIR) leaks in.
 */
export function runKeys(args: string[], env: Record<string, string>): Promise<CliRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['-r', './test/support/ts-register.js', 'src/cli/main.ts', ...args], {
      cwd: REPO_ROOT,
      env: { PATH: process.env.PATH ?? '', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    // A hang guard (was 20 s: a crowded machine's start is slower than that), not a speed claim.
    const timer = setTimeout(() => child.kill('SIGKILL'), START_HANG_GUARD_MS);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** No line of a stack trace ("    at fn (file:line)") anywhere in the output. */
export function expectNoStackTrace(run: CliRun): void {
  expect(`${run.stdout}\n${run.stderr}`).not.toMatch(/^\s+at .+/m);
}
