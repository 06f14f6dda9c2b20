import { execFile, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { LoadResult, LoadSettings } from './load';

/** Whether wrk (Debian package `wrk`) is on PATH. */
export function wrkAvailable(): boolean {
  return !spawnSync('wrk', ['--version']).error;
}

/** `1.23ms`, `850.00us`, `2.01s` → milliseconds. */
function milliseconds(text: string): number {
  const match = /^([\d.]+)(us|ms|s)$/.exec(text.trim());
  if (!match) throw new Error(`wrk printed a latency bench cannot read: ${text}`);
  const value = Number(match[1]);
  return match[2] === 'us' ? value / 1000 : match[2] === 's' ? value * 1000 : value;
}

/** Reads wrk's own report (`--latency`). */
export function parseWrkOutput(output: string, durationSeconds: number): LoadResult {
  const requests = Number(/^\s*(\d+) requests in ([\d.]+)(m?s)/m.exec(output)?.[1]);
  if (!Number.isFinite(requests)) throw new Error(`wrk printed no request count:\n${output}`);
  const rps = Number(/^Requests\/sec:\s+([\d.]+)/m.exec(output)?.[1]);
  const p50 = /^\s+50%\s+(\S+)/m.exec(output)?.[1];
  const p99 = /^\s+99%\s+(\S+)/m.exec(output)?.[1];
  const non2xx = Number(/^\s*Non-2xx or 3xx responses: (\d+)/m.exec(output)?.[1] ?? 0);
  const socketErrors = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(output);
  const errors = socketErrors ? socketErrors.slice(1).reduce((sum, n) => sum + Number(n), 0) : 0;
  return {
    requests,
    sent: requests,
    durationSeconds,
    requestsPerSecond: rps,
    p50Ms: p50 ? milliseconds(p50) : 0,
    p99Ms: p99 ? milliseconds(p99) : 0,
    // wrk tells 2xx/3xx from the rest, not one status from another: the bench checks the status
    // of each variant with one request before it loads it.
    statuses: { '2xx': requests - non2xx, other: non2xx },
    errors,
  };
}

/**
 * One wrk run: one thread (one core for the client, the other for what is measured), keep-alive
 * connections, no pipelining, latency percentiles from wrk's own histogram.
 */
export function runWrk(settings: LoadSettings): Promise<LoadResult> {
  const args = [
    '-t1',
    `-c${settings.connections}`,
    `-d${Math.max(1, Math.round(settings.durationSeconds))}s`,
    '--latency',
    '--timeout',
    '10s',
  ];
  for (const [name, value] of Object.entries(settings.headers ?? {})) {
    if (!(settings.roundRobinKeys && name === 'authorization')) args.push('-H', `${name}: ${value}`);
  }
  const script = settings.roundRobinKeys ? roundRobinScript(settings.roundRobinKeys) : null;
  if (script) args.push('-s', script);
  args.push(settings.url);
  return new Promise((resolve, reject) => {
    execFile('wrk', args, { timeout: (settings.durationSeconds + 30) * 1000 }, (err, stdout, stderr) => {
      if (script) fs.rmSync(path.dirname(script), { recursive: true, force: true });
      if (err) return reject(new Error(`wrk failed: ${err.message}\n${stderr}`));
      try {
        resolve(parseWrkOutput(stdout, settings.durationSeconds));
      } catch (parseError) {
        reject(parseError as Error);
      }
    });
  });
}

/** A wrk script that sends each request with the next key of the list, round and round. */
function roundRobinScript(keys: string[]): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'asg-wrk-'));
  const file = path.join(dir, 'round-robin.lua');
  fs.writeFileSync(
    file,
    `local keys = {${keys.map((key) => JSON.stringify(`Bearer ${key}`)).join(',')}}
local i = 0
request = function()
  i = i % #keys + 1
  return wrk.format(nil, nil, { ["Authorization"] = keys[i] })
end
`,
  );
  return file;
}
