import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { stringify as toYaml } from 'yaml';
import { assertPrometheusBinary } from './prometheus-config';
import { freePort } from './redis-server';
import { eventually } from './eventually';

export interface ScrapeTarget {
  /** host:port of an admin listener. */
  address: string;
  labels: Record<string, string>;
}

export interface PrometheusOptions {
  job: string;
  targets: ScrapeTarget[];
  ruleFiles: string[];
  /** Scrape and rule evaluation interval, e.g. "1s". */
  interval: string;
}

export interface PrometheusProcess {
  url: string;
  /** The instant query API: the data of a successful answer, or the error Prometheus gave. */
  query(expr: string): Promise<PrometheusAnswer>;
  /** GET of any API path, JSON. */
  api<T>(pathAndQuery: string): Promise<T>;
  /** Prometheus's own log, for failure messages. */
  log(): string;
  stop(): Promise<void>;
}

export type PrometheusAnswer =
  | {
      status: 'success';
      data: { resultType: string; result: Array<{ metric: Record<string, string>; value: [number, string] }> };
    }
  | { status: 'error'; errorType: string; error: string };

/**
 * Starts Debian's `prometheus` on a free loopback port with a config of our own (the given
 * targets, the given rule files, one interval for scraping and evaluation) on a throwaway TSDB.
 * Fails loudly when the binary is missing.
 */
export async function startPrometheus(options: PrometheusOptions): Promise<PrometheusProcess> {
  assertPrometheusBinary('prometheus');
  const port = await freePort();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'asg-prometheus-'));
  const configFile = path.join(dir, 'prometheus.yml');
  fs.writeFileSync(
    configFile,
    toYaml({
      global: {
        scrape_interval: options.interval,
        scrape_timeout: options.interval,
        evaluation_interval: options.interval,
      },
      rule_files: options.ruleFiles,
      scrape_configs: [
        {
          job_name: options.job,
          metrics_path: '/metrics',
          static_configs: options.targets.map((t) => ({ targets: [t.address], labels: t.labels })),
        },
      ],
    }),
  );
  const logFile = path.join(dir, 'prometheus.log');
  const logFd = fs.openSync(logFile, 'a');
  const child = spawn(
    'prometheus',
    [
      `--config.file=${configFile}`,
      `--storage.tsdb.path=${path.join(dir, 'data')}`,
      `--web.listen-address=127.0.0.1:${port}`,
      '--log.level=warn',
    ],
    { stdio: ['ignore', logFd, logFd] },
  );
  fs.closeSync(logFd);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const url = `http://127.0.0.1:${port}`;
  const log = () => fs.readFileSync(logFile, 'utf8');

  // A hang guard (docs/testing.md), not a speed claim: a start on a crowded machine is slow.
  try {
    await eventually(
      async () => {
        if (child.exitCode !== null) throw new Error(`prometheus exited with ${child.exitCode}:\n${log()}`);
        return fetch(`${url}/-/ready`).then(
          (res) => res.ok,
          () => false,
        );
      },
      { timeoutMs: 60_000, pollMs: 100, what: () => `prometheus ready:\n${log()}` },
    );
  } catch (err) {
    child.kill('SIGKILL');
    throw err;
  }

  async function api<T>(pathAndQuery: string): Promise<T> {
    const res = await fetch(`${url}${pathAndQuery}`);
    return (await res.json()) as T;
  }

  return {
    url,
    api,
    query: (expr) => api<PrometheusAnswer>(`/api/v1/query?query=${encodeURIComponent(expr)}`),
    log,
    async stop() {
      if (child.exitCode === null) child.kill('SIGTERM');
      const killTimer = setTimeout(() => child.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(killTimer);
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}
