import { execFile, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { LoadResult, LoadSettings } from './load';

/** Whether h2load (Debian package `nghttp2-client`) is on PATH. */
export function h2loadAvailable(): boolean {
  return !spawnSync('h2load', ['--version']).error;
}

/** `h2`: HTTP/2 by ALPN; `http/1.1`: HTTPS/1.1 (`--h1`), the same client for both rows. */
export type TlsProtocol = 'h2' | 'http/1.1';

function quantileMs(sortedMicros: number[], q: number): number {
  if (sortedMicros.length === 0) return 0;
  return sortedMicros[Math.min(sortedMicros.length - 1, Math.ceil(q * sortedMicros.length) - 1)]! / 1000;
}

/**
 * Reads h2load's summary and its per-request log (`--log-file`: start µs, status, µs to the end of
 * the response, tab-separated), from which p50 and p99 come (its summary has mean and max only).
 */
export function parseH2loadOutput(output: string, logText: string, durationSeconds: number): LoadResult {
  const done =
    /^requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout/m.exec(
      output,
    );
  if (!done) throw new Error(`h2load printed no request counts:\n${output}`);
  const codes = /^status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx/m.exec(output);
  const rps = Number(/^finished in [\d.]+m?s, ([\d.]+) req\/s/m.exec(output)?.[1]);
  const statuses: Record<string, number> = {};
  const micros: number[] = [];
  for (const line of logText.split('\n')) {
    const [, status, elapsed] = line.split('\t');
    if (status === undefined || elapsed === undefined) continue;
    statuses[status] = (statuses[status] ?? 0) + 1;
    micros.push(Number(elapsed));
  }
  micros.sort((a, b) => a - b);
  const requests = Number(done[3]);
  return {
    requests,
    sent: Number(done[2]),
    durationSeconds,
    requestsPerSecond: rps,
    p50Ms: quantileMs(micros, 0.5),
    p99Ms: quantileMs(micros, 0.99),
    statuses:
      Object.keys(statuses).length > 0
        ? statuses
        : { '2xx': Number(codes?.[1] ?? 0), other: requests - Number(codes?.[1] ?? 0) },
    errors: Number(done[6]) + Number(done[7]),
  };
}

/**
 * One h2load run over TLS: one thread, `connections` connections, one request at a time on each
 * (`-m 1`, as wrk and autocannon run HTTP/1.1 without pipelining), for the duration. The test
 * certificate is not verified by h2load (it never is), which changes nothing measured.
 */
export function runH2load(settings: LoadSettings, protocol: TlsProtocol): Promise<LoadResult> {
  const log = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'asg-h2load-')), 'requests.tsv');
  const seconds = Math.max(1, Math.round(settings.durationSeconds));
  const args = [
    '-t1',
    `-c${settings.connections}`,
    '-m1',
    `-D${seconds}`,
    `--log-file=${log}`,
    ...(protocol === 'http/1.1' ? ['--h1'] : []),
  ];
  for (const [name, value] of Object.entries(settings.headers ?? {})) args.push('-H', `${name}: ${value}`);
  args.push(settings.url);
  return new Promise((resolve, reject) => {
    execFile('h2load', args, { timeout: (seconds + 30) * 1000, maxBuffer: 16 * 2 ** 20 }, (err, stdout, stderr) => {
      if (err) return reject(new Error(`h2load failed: ${err.message}\n${stderr}`));
      try {
        const result = parseH2loadOutput(stdout, fs.readFileSync(log, 'utf8'), settings.durationSeconds);
        fs.rmSync(path.dirname(log), { recursive: true, force: true });
        resolve(result);
      } catch (parseError) {
        reject(parseError as Error);
      }
    });
  });
}
