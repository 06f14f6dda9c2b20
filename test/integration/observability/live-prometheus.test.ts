import request from 'supertest';
import { freePort, startRedisServer, type RedisProcess } from '../../support/redis-server';
import { uniqueNamespace } from '../../support/test-redis';
import { startTestProduct, type ProductHarness } from '../../support/product-harness';
import { startPrometheus, type PrometheusAnswer, type PrometheusProcess } from '../../support/prometheus-server';
import {
  alertRules,
  dashboardTargets,
  exportedMetricNames,
  readDashboard,
  recordingRules,
  resolveGrafanaVariables,
  ruleFiles,
  type DashboardTarget,
} from '../../support/prometheus-config';
import { eventually } from '../../support/eventually';
import { createKey } from '../../support/keys';

/**
 * Issue 16: the project's rule files and dashboard queries against the real thing. Debian's
 * Prometheus scrapes two real gateways on loopback every second and evaluates the rules every
 * second: one gateway on Redis with its embedded inventory, one whose upstream is a dead port (for
 * 5xx and upstream errors), and one whose Redis was killed under it with store.failMode open (for
 * the store row: errors, degraded, requests served without limits). Traffic runs in two rounds with a scrape between them, so that every
 * counter has a sample before and after an increase and every rate is above zero. Then Prometheus's
 * HTTP API says whether every rule is healthy, every dashboard query is valid PromQL with data, and
 * every metric the rules and the dashboard read is exported: a metric renamed in the gateway's code
 * fails this suite.
 */

/** Grafana's $__rate_interval for a 1 s scrape, widened to take in both rounds of traffic. */
const RATE_INTERVAL = '1m';

function scalarOf(answer: PrometheusAnswer): number | null {
  if (answer.status !== 'success' || answer.data.result.length === 0) return null;
  return Number(answer.data.result[0]!.value[1]);
}

interface RulesAnswer {
  data: {
    groups: Array<{
      name: string;
      rules: Array<{ name: string; type: string; health: string; lastError?: string; lastEvaluation: string }>;
    }>;
  };
}

describe('the rules and the dashboard on a live Prometheus scraping live gateways', () => {
  let product: ProductHarness;
  let deadUpstream: ProductHarness;
  let storeDown: ProductHarness;
  let storeDownKey: { auth: string };
  let privateRedis: RedisProcess;
  let prometheus: PrometheusProcess;
  /** Responses each gateway has answered, by environment label. */
  const answered = { test: 0, 'test-dead-upstream': 0, 'test-store-down': 0 };
  const dashboard = readDashboard();
  const results = new Map<DashboardTarget, PrometheusAnswer>();

  /** One round: admitted, 401, 429 (day), a ban, deprecated calls, and 502s (503s once its circuit opens) on the dead upstream. */
  async function driveTraffic(): Promise<void> {
    const gateway = () => request(product.gatewayUrl);
    const expectStatus = async (status: number, send: () => request.Test) => {
      const res = await send();
      answered.test++;
      expect({ status: res.status, body: res.status === status ? null : (res.body as unknown) }).toEqual({
        status,
        body: null,
      });
      return res;
    };

    const pro = await createKey(product, { plan: 'pro', limits: { perMinute: 100, perDay: 1000 } });
    for (let i = 0; i < 5; i++) await expectStatus(200, () => gateway().get('/v1/pets').set('Authorization', pro.auth));
    const created = await expectStatus(201, () =>
      gateway().post('/v1/pets').set('Authorization', pro.auth).send({ name: 'Rex', categoryId: 1 }),
    );
    // The deprecated operation (GET /v1/pets/{petId}), twice.
    const location = created.headers.location as string;
    await expectStatus(200, () => gateway().get(location).set('Authorization', pro.auth));
    await expectStatus(200, () => gateway().get(location).set('Authorization', pro.auth));

    await expectStatus(401, () => gateway().get('/v1/pets'));
    await expectStatus(401, () =>
      gateway()
        .get('/v1/pets')
        .set('Authorization', `Bearer asg_dev_${'Z'.repeat(32)}`),
    );

    // free, 5 a day: 5 admitted (the 4th passes 80 % of the day), then refused by the day.
    const free = await createKey(product, { plan: 'free', limits: { perMinute: 100, perDay: 5 } });
    for (let i = 0; i < 5; i++)
      await expectStatus(200, () => gateway().get('/v1/pets').set('Authorization', free.auth));
    for (let i = 0; i < 2; i++)
      await expectStatus(429, () => gateway().get('/v1/pets').set('Authorization', free.auth));

    // business, 1 a day, banned after its 3rd refusal (ban.threshold 2), then refused as banned.
    const business = await createKey(product, { plan: 'business', limits: { perMinute: 100, perDay: 1 } });
    await expectStatus(200, () => gateway().get('/v1/pets').set('Authorization', business.auth));
    for (let i = 0; i < 3; i++)
      await expectStatus(429, () => gateway().get('/v1/pets').set('Authorization', business.auth));
    const banned = await expectStatus(429, () => gateway().get('/v1/pets').set('Authorization', business.auth));
    expect((banned.body as { code: string }).code).toBe('temporarily_banned');

    // A month quota of 5 (the key's own): 5 admitted (the 4th passes 80 % of the month), then
    // refused by the month window, for the dashboard's month panel and the month alert.
    const metered = await createKey(product, { plan: 'pro', limits: { perMinute: 100, perDay: 100, perMonth: 5 } });
    for (let i = 0; i < 5; i++)
      await expectStatus(200, () => gateway().get('/v1/pets').set('Authorization', metered.auth));
    await expectStatus(429, () => gateway().get('/v1/pets').set('Authorization', metered.auth));

    const dead = await createKey(deadUpstream, { plan: 'pro' });
    for (let i = 0; i < 3; i++) {
      const res = await request(deadUpstream.gatewayUrl).get('/v1/pets').set('Authorization', dead.auth);
      answered['test-dead-upstream']++;
      // 502 while it is tried; 503 once the circuit breaker has seen 5 refusals (a later round).
      expect({ status: [502, 503].includes(res.status), code: (res.body as { code: string }).code }).toEqual({
        status: true,
        code: 'upstream_unavailable',
      });
    }

    // Redis is gone and store.failMode is open: the cached key is served without limits.
    for (let i = 0; i < 3; i++) {
      const res = await request(storeDown.gatewayUrl).get('/v1/pets').set('Authorization', storeDownKey.auth);
      answered['test-store-down']++;
      expect(res.status).toBe(200);
    }
  }

  /**
   * A gateway on a private Redis that is then killed. The key is created by another instance first
   * (as store-outage.test.ts does): a key created by the instance under test announces itself on
   * pub/sub, which could evict it from the cache just before the outage.
   */
  async function startGatewayThenKillItsRedis(): Promise<void> {
    privateRedis = await startRedisServer();
    const options = {
      redis: false,
      env: { REDIS_URL: privateRedis.url },
      namespace: uniqueNamespace('observability-outage'),
      overrides: { store: { failMode: 'open' }, redis: { commandTimeoutMs: 200 } },
    };
    const creator = await startTestProduct(options);
    try {
      storeDownKey = await createKey(creator, { plan: 'free' });
    } finally {
      await creator.close();
    }
    storeDown = await startTestProduct(options);
    // One request while Redis answers caches the key.
    const res = await request(storeDown.gatewayUrl).get('/v1/pets').set('Authorization', storeDownKey.auth);
    answered['test-store-down']++;
    expect(res.status).toBe(200);
    await privateRedis.stop();
  }

  /** Waits until Prometheus holds a scrape of each gateway taken after everything answered so far. */
  async function waitForScrapeOfEverything(): Promise<void> {
    for (const [environment, count] of Object.entries(answered)) {
      await eventually(
        async () =>
          scalarOf(await prometheus.query(`sum(gateway_http_requests_total{environment="${environment}"})`)) === count,
        {
          timeoutMs: 20_000,
          what: () => `a scrape of ${environment} with ${count} requests; Prometheus log:\n${prometheus.log()}`,
          pollMs: 100,
        },
      );
    }
  }

  beforeAll(async () => {
    product = await startTestProduct({
      overrides: { ban: { threshold: 2, windowSeconds: 60, durationSeconds: 600 }, anonymous: { perMinute: 10_000 } },
    });
    // A window and a cool-down longer than the test: the 6th request to it is refused by the open
    // circuit (5 settled, all failed), whatever the scrapes take.
    deadUpstream = await startTestProduct({
      redis: false,
      overrides: {
        upstream: {
          url: `http://127.0.0.1:${await freePort()}`,
          circuitBreaker: {
            failureRatio: 0.5,
            minimumRequests: 5,
            windowMs: 600_000,
            cooldownMs: 600_000,
            halfOpenProbes: 3,
          },
        },
      },
    });
    await startGatewayThenKillItsRedis();
    prometheus = await startPrometheus({
      job: 'gateway',
      interval: '1s',
      ruleFiles,
      targets: [
        { address: new URL(product.adminUrl).host, labels: { environment: 'test' } },
        { address: new URL(deadUpstream.adminUrl).host, labels: { environment: 'test-dead-upstream' } },
        { address: new URL(storeDown.adminUrl).host, labels: { environment: 'test-store-down' } },
      ],
    });
    await eventually(async () => scalarOf(await prometheus.query('sum(up{job="gateway"})')) === 3, {
      timeoutMs: 20_000,
      what: () => `the three gateways scraped; Prometheus log:\n${prometheus.log()}`,
      pollMs: 100,
    });

    await driveTraffic();
    await waitForScrapeOfEverything();
    await driveTraffic();
    await waitForScrapeOfEverything();
    // Every rule evaluated once more after that scrape.
    const scraped = Date.now();
    await eventually(
      async () => {
        const rules = await prometheus.api<RulesAnswer>('/api/v1/rules');
        return rules.data.groups.every((g) => g.rules.every((r) => Date.parse(r.lastEvaluation) > scraped));
      },
      {
        timeoutMs: 20_000,
        what: () => `a rule evaluation after the last scrape; Prometheus log:\n${prometheus.log()}`,
        pollMs: 100,
      },
    );

    // A scrape that timed out on a loaded machine marks its series stale until the next one.
    await eventually(async () => scalarOf(await prometheus.query('min(up{job="gateway"})')) === 1, {
      timeoutMs: 20_000,
      what: () => `the three gateways up; Prometheus log:\n${prometheus.log()}`,
      pollMs: 100,
    });
    for (const target of dashboardTargets(dashboard)) {
      results.set(target, await prometheus.query(resolveGrafanaVariables(target.expr, RATE_INTERVAL)));
    }
    // What each panel showed after this traffic, for the record (issue 16 asks the note to give it).
    const shown = [...results].map(([target, answer]) => {
      const series = answer.status === 'success' ? answer.data.result : [];
      const values = series
        .slice(0, 4)
        .map((s) => `${Object.values(s.metric).join(',') || '·'}=${Number(s.value[1]).toPrecision(3)}`);
      return `  ${target.panel} [${target.refId}]: ${values.join('  ')}${series.length > 4 ? `  (+${series.length - 4} more)` : ''}`;
    });
    console.log(`dashboard queries after the test's traffic:\n${shown.join('\n')}`);
  }, 60_000);

  afterAll(async () => {
    await prometheus?.stop();
    await product?.close();
    await deadUpstream?.close();
    await storeDown?.close();
    await privateRedis?.stop();
  });

  it('loads every rule of the project and finds each one healthy', async () => {
    const rules = (await prometheus.api<RulesAnswer>('/api/v1/rules')).data.groups.flatMap((g) => g.rules);
    expect(rules.map((r) => r.name).sort()).toEqual(
      [...recordingRules().map((r) => r.record!), ...alertRules().map((r) => r.alert!)].sort(),
    );
    for (const rule of rules) {
      expect({ rule: rule.name, health: rule.health, lastError: rule.lastError ?? '' }).toEqual({
        rule: rule.name,
        health: 'ok',
        lastError: '',
      });
    }
  });

  it('answers every dashboard query as valid PromQL', () => {
    expect(results.size).toBeGreaterThan(20);
    for (const [target, answer] of results) {
      const error = answer.status === 'error' ? answer.error : null;
      expect({ panel: target.panel, refId: target.refId, error }).toEqual({
        panel: target.panel,
        refId: target.refId,
        error: null,
      });
    }
  });

  it('has data for every dashboard query', () => {
    for (const [target, answer] of results) {
      const hasData = answer.status === 'success' && answer.data.result.length > 0;
      expect({ panel: target.panel, refId: target.refId, hasData }).toEqual({
        panel: target.panel,
        refId: target.refId,
        hasData: true,
      });
    }
  });

  it("answers the environment variable's query with every environment", async () => {
    const variable = dashboard.templating.list.find((v) => v.name === 'environment')!;
    expect(variable.definition).toBe('label_values(gateway_http_requests_total, environment)');
    const values = await prometheus.api<{ data: string[] }>(
      `/api/v1/label/environment/values?match[]=${encodeURIComponent('gateway_http_requests_total')}`,
    );
    expect(values.data.sort()).toEqual(['test', 'test-dead-upstream', 'test-store-down']);
  });

  it('exports every metric that the rules and the dashboard read (a renamed metric fails here)', async () => {
    const exported = new Set((await prometheus.api<{ data: string[] }>('/api/v1/label/__name__/values')).data);
    const exprs = [...recordingRules(), ...alertRules()]
      .map((r) => r.expr)
      .concat(dashboardTargets(dashboard).map((t) => t.expr));
    const read = new Set(exprs.flatMap(exportedMetricNames));
    expect(read.size).toBeGreaterThan(15);
    for (const name of read) {
      expect({ name, exported: exported.has(name) }).toEqual({ name, exported: true });
    }
    // And every recording rule produced its series.
    for (const rule of recordingRules())
      expect({ record: rule.record, present: exported.has(rule.record!) }).toEqual({
        record: rule.record,
        present: true,
      });
  });

  it('shows the traffic that was sent, where it was sent', async () => {
    /** label value → sample value, for one label of the answer's series. */
    const valueOf = async (expr: string, label: string) => {
      const answer = await prometheus.query(expr);
      if (answer.status !== 'success') throw new Error(answer.error);
      return Object.fromEntries(answer.data.result.map((r) => [r.metric[label] ?? '', Number(r.value[1])]));
    };
    const statuses = await valueOf(
      `sum by (status_code) (increase(gateway_http_requests_total{environment="test"}[${RATE_INTERVAL}]))`,
      'status_code',
    );
    expect(Object.keys(statuses).sort()).toEqual(['200', '201', '401', '429']);
    expect(await valueOf('job:gateway_http_5xx:ratio_rate5m', 'environment')).toEqual({
      test: 0,
      'test-dead-upstream': 1,
      'test-store-down': 0,
    });
    expect(await valueOf('job:gateway_upstream_errors:ratio_rate5m', 'environment')).toEqual({
      test: 0,
      'test-dead-upstream': 1,
      'test-store-down': 0,
    });
    // Refused until 5 refusals open the circuit breaker; then refused by the gateway without trying
    // (a series born in the last round may not have the two samples a rate needs yet).
    const reasons = Object.keys(await valueOf('job_reason:gateway_upstream_errors:rate5m', 'reason'));
    expect(reasons).toContain('refused');
    expect(reasons.filter((reason) => reason !== 'refused' && reason !== 'circuit_open')).toEqual([]);
    const rejections = await valueOf(
      'sum by (window) (job_plan_window:gateway_ratelimit_rejections:rate5m{environment="test"})',
      'window',
    );
    expect(Object.keys(rejections).sort()).toEqual(['ban', 'day', 'month']);
    for (const value of Object.values(rejections)) expect(value).toBeGreaterThan(0);
    expect(await valueOf('sum by (plan) (job_plan:gateway_key_bans:increase15m{environment="test"})', 'plan')).toEqual({
      business: expect.any(Number),
    });
    expect(
      (await valueOf('sum by (plan) (job_plan:gateway_key_bans:increase15m{environment="test"})', 'plan')).business,
    ).toBeGreaterThan(0);
    const nearLimit = await valueOf(
      'sum by (plan) (job_plan_window:gateway_ratelimit_near_limit:increase1h{environment="test", window="day"})',
      'plan',
    );
    expect(nearLimit.free).toBeGreaterThan(0);
    // The configured sunset (5 December 2030) as the gateway exports it.
    // The store row: only the gateway whose Redis died is degraded, has store errors and serves unlimited.
    expect(await valueOf('max by (environment) (gateway_store_degraded)', 'environment')).toEqual({
      test: 0,
      'test-dead-upstream': 0,
      'test-store-down': 1,
    });
    expect((await valueOf('job:gateway_store_errors:rate5m', 'environment'))['test-store-down']).toBeGreaterThan(0);
    expect((await valueOf('job:gateway_store_errors:rate5m', 'environment')).test).toBe(0);
    expect(
      Object.keys(
        await valueOf(
          `sum by (environment) (rate(gateway_ratelimit_unenforced_total[${RATE_INTERVAL}]))`,
          'environment',
        ),
      ),
    ).toEqual(['test-store-down']);
    const sunset = await prometheus.query('gateway_deprecation_sunset_timestamp_seconds{environment="test"}');
    expect(
      sunset.status === 'success' &&
        sunset.data.result.map((r) => ({ method: r.metric.method, route: r.metric.route, value: Number(r.value[1]) })),
    ).toEqual([{ method: 'GET', route: '/v1/pets/{petId}', value: Date.UTC(2030, 11, 5) / 1000 }]);
  });
});
