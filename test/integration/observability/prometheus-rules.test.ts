import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { parse as parseYaml } from 'yaml';
import {
  alertRules,
  assertPrometheusBinary,
  dashboardPanels,
  dashboardTargets,
  prometheusFolder,
  readDashboard,
  recordedMetricNames,
  recordingRules,
  repositoryRoot,
  ruleFiles,
  ruleTestFiles,
} from '../../support/prometheus-config';

/**
 * Issue 16: the rules ops load as they are. promtool (Debian's prometheus package) checks their
 * syntax and runs their unit tests (config/prometheus/tests); this suite fails, naming the
 * package, when promtool is missing. The rules against a live Prometheus and a live gateway are
 * in live-prometheus.test.ts.
 */

function promtool(...args: string[]): { status: number | null; output: string } {
  const run = spawnSync('promtool', args, { encoding: 'utf8', cwd: repositoryRoot });
  return { status: run.status, output: `${run.stdout}${run.stderr}` };
}

interface RuleTestFile {
  rule_files: string[];
  tests: Array<{ name: string; alert_rule_test?: Array<{ alertname: string; exp_alerts: unknown[] }> }>;
}

describe('config/prometheus rules', () => {
  beforeAll(() => assertPrometheusBinary('promtool'));

  it('pass promtool check rules', () => {
    const check = promtool('check', 'rules', ...ruleFiles);
    expect({ status: check.status, output: check.output }).toEqual({
      status: 0,
      output: expect.stringContaining('SUCCESS'),
    });
  });

  it('and the compose scrape config that loads them pass promtool check config', () => {
    const check = promtool('check', 'config', path.join(prometheusFolder, 'prometheus.yml'));
    expect({ status: check.status, output: check.output }).toEqual({
      status: 0,
      output: expect.stringContaining('SUCCESS'),
    });
  });

  it('pass their promtool unit tests', () => {
    const run = promtool('test', 'rules', ...ruleTestFiles);
    expect({ status: run.status, output: run.output }).toEqual({
      status: 0,
      output: expect.stringContaining('SUCCESS'),
    });
  });

  it('have a unit test where each alert fires and one where it does not', () => {
    const cases = ruleTestFiles.flatMap((file) => {
      const tests = parseYaml(fs.readFileSync(file, 'utf8')) as RuleTestFile;
      expect(tests.rule_files.map((ruleFile) => path.resolve(path.dirname(file), ruleFile)).sort()).toEqual(
        [...ruleFiles].sort(),
      );
      return tests.tests.flatMap((t) => t.alert_rule_test ?? []);
    });
    for (const alert of alertRules().map((rule) => rule.alert!)) {
      const fires = cases.some((c) => c.alertname === alert && c.exp_alerts.length > 0);
      const stays = cases.some((c) => c.alertname === alert && c.exp_alerts.length === 0);
      expect({ alert, fires, stays }).toEqual({ alert, fires: true, stays: true });
    }
  });

  it('give every alert a severity, a summary, a description that says what to check first and a section in docs/runbook.md', () => {
    const runbookSection = fs.readFileSync(path.join(repositoryRoot, 'docs', 'runbook.md'), 'utf8');
    expect(runbookSection.startsWith('# Runbook\n')).toBe(true);
    const alerts = alertRules();
    expect(alerts.length).toBeGreaterThanOrEqual(8);
    for (const rule of alerts) {
      const alert = rule.alert!;
      expect({ alert, severity: rule.labels?.severity }).toEqual({
        alert,
        severity: expect.stringMatching(/^(critical|warning|info)$/),
      });
      expect({ alert, summary: rule.annotations?.summary }).toEqual({ alert, summary: expect.any(String) });
      expect({ alert, description: rule.annotations?.description }).toEqual({
        alert,
        description: expect.stringContaining('Check first'),
      });
      expect({ alert, runbook: rule.annotations?.runbook_url }).toEqual({
        alert,
        runbook: `docs/runbook.md#${alert.toLowerCase()}`,
      });
      expect({ alert, inRunbook: runbookSection.includes(`\n## ${alert}\n`) }).toEqual({ alert, inRunbook: true });
    }
  });

  it('cover what the issue asks for: down, store, 5xx, upstream errors and latency, p99, bans, near limit, deprecations', () => {
    const exprs = Object.fromEntries(alertRules().map((rule) => [rule.alert!, rule.expr]));
    const reads = (alert: string, needle: string) => ({ alert, needle, reads: (exprs[alert] ?? '').includes(needle) });
    for (const [alert, needle] of [
      ['GatewayDown', 'up{job="gateway"}'],
      ['GatewayStoreDegraded', 'gateway_store_degraded'],
      ['GatewayStoreErrors', 'job:gateway_store_errors:rate5m'],
      ['GatewayHigh5xxRatio', 'job:gateway_http_5xx:ratio_rate5m'],
      ['GatewayUpstreamErrors', 'job:gateway_upstream_errors:ratio_rate5m'],
      ['GatewayUpstreamSlow', 'job:gateway_upstream_request_duration_seconds:p99_5m'],
      ['GatewayLatencyP99OverBudget', 'job:gateway_http_request_duration_seconds:p99_5m'],
      ['GatewayBanSurge', 'job_plan:gateway_key_bans:increase15m'],
      ['GatewayKeysNearMinuteLimit', 'gateway_ratelimit_near_limit_total'],
      ['GatewayKeysNearDayLimit', 'gateway_ratelimit_near_limit_total'],
      ['GatewayDeprecatedCallsNearSunset', 'gateway_deprecation_sunset_timestamp_seconds'],
    ] as const) {
      expect(reads(alert, needle)).toEqual({ alert, needle, reads: true });
    }
  });
});

describe('config/grafana dashboard', () => {
  const dashboard = readDashboard();

  it('picks its Prometheus through a data source variable, in every panel and query', () => {
    const variable = dashboard.templating.list.find((v) => v.type === 'datasource');
    expect(variable).toEqual(expect.objectContaining({ name: 'datasource', query: 'prometheus' }));
    for (const panel of dashboardPanels(dashboard).filter((p) => p.type !== 'row')) {
      expect({ panel: panel.title, datasource: panel.datasource }).toEqual({
        panel: panel.title,
        datasource: { type: 'prometheus', uid: '${datasource}' },
      });
    }
  });

  it('has the rows the issue lists', () => {
    const rows = dashboard.panels.filter((p) => p.type === 'row').map((p) => p.title);
    expect(rows).toEqual(['Traffic', 'Limiter', 'Store', 'Upstream', 'Process']);
  });

  it('reads only recorded series that the recording rules define', () => {
    const recorded = new Set(recordingRules().map((rule) => rule.record!));
    for (const target of dashboardTargets(dashboard)) {
      for (const name of recordedMetricNames(target.expr)) {
        expect({ panel: target.panel, name, defined: recorded.has(name) }).toEqual({
          panel: target.panel,
          name,
          defined: true,
        });
      }
    }
  });
});
