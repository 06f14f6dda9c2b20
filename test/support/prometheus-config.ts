import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { parse as parseYaml } from 'yaml';

/** The project's observability files, as ops load them (config/prometheus, config/grafana). */
export const repositoryRoot = path.resolve(__dirname, '..', '..');
export const prometheusFolder = path.join(repositoryRoot, 'config', 'prometheus');
export const ruleFiles = ['recording-rules.yml', 'alert-rules.yml'].map((file) => path.join(prometheusFolder, file));
export const ruleTestFiles = ['alert-rules.test.yml', 'alert-rules-daily.test.yml'].map((file) =>
  path.join(prometheusFolder, 'tests', file),
);
export const dashboardFile = path.join(repositoryRoot, 'config', 'grafana', 'dashboards', 'gateway.json');

const INSTALL_HINT =
  'is not on PATH: the alert rules and the observability tests need Prometheus. Install it ' +
  '(Debian: `apt-get install prometheus`, which brings `prometheus` and `promtool`).';

/** Fails loudly, naming the package, when a Prometheus binary is missing. */
export function assertPrometheusBinary(binary: 'prometheus' | 'promtool'): void {
  const probe = spawnSync(binary, ['--version'], { encoding: 'utf8' });
  if (probe.error || probe.status !== 0) throw new Error(`${binary} ${INSTALL_HINT}`);
}

export interface Rule {
  record?: string;
  alert?: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

export function readRules(file: string): Rule[] {
  const parsed = parseYaml(fs.readFileSync(file, 'utf8')) as { groups: Array<{ rules: Rule[] }> };
  return parsed.groups.flatMap((group) => group.rules);
}

export const alertRules = (): Rule[] => ruleFiles.flatMap(readRules).filter((rule) => rule.alert !== undefined);
export const recordingRules = (): Rule[] => ruleFiles.flatMap(readRules).filter((rule) => rule.record !== undefined);

export interface DashboardTarget {
  panel: string;
  refId: string;
  expr: string;
}

interface DashboardPanel {
  type: string;
  title: string;
  datasource?: { type: string; uid: string };
  targets?: Array<{ refId: string; expr: string; datasource?: { uid: string } }>;
  panels?: DashboardPanel[];
}

export interface Dashboard {
  uid: string;
  title: string;
  schemaVersion: number;
  panels: DashboardPanel[];
  templating: { list: Array<{ name: string; type: string; query: unknown; definition?: string; allValue?: string }> };
}

export function readDashboard(): Dashboard {
  return JSON.parse(fs.readFileSync(dashboardFile, 'utf8')) as Dashboard;
}

/** Every panel, rows' nested panels included. */
export function dashboardPanels(dashboard: Dashboard): DashboardPanel[] {
  return dashboard.panels.flatMap((panel) => [panel, ...(panel.panels ?? [])]);
}

export function dashboardTargets(dashboard: Dashboard): DashboardTarget[] {
  return dashboardPanels(dashboard).flatMap((panel) =>
    (panel.targets ?? []).map((t) => ({ panel: panel.title, refId: t.refId, expr: t.expr })),
  );
}

/**
 * A dashboard expression as Grafana would send it: "All" environments, and $__rate_interval at
 * least four scrapes of the given interval (what Grafana computes from the data source's
 * timeInterval).
 */
export function resolveGrafanaVariables(expr: string, rateInterval: string): string {
  return expr.replaceAll('$__rate_interval', rateInterval).replaceAll('$environment', '.*');
}

/** Metric names an expression reads from the gateway (gateway_*, inventory_*, process_*, nodejs_*). */
export function exportedMetricNames(expr: string): string[] {
  // Not the metric part of a recorded name (job:gateway_http_requests:rate5m).
  return [...new Set(expr.match(/(?<![\w:])(?:gateway|inventory|process|nodejs)_[a-z0-9_]+(?![\w:])/g) ?? [])];
}

/** Recorded series names (level:metric:operations) an expression reads. */
export function recordedMetricNames(expr: string): string[] {
  return [...new Set(expr.match(/(?<![\w:])[a-z_]+:[a-z0-9_]+:[a-z0-9_]+(?![\w:])/g) ?? [])];
}
