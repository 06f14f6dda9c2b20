import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { createGatewayMetrics } from '../../../../src/shared/metrics/metrics';
import { createKeyDurabilityMetrics } from '../../../../src/keys';
import { createConfigMetrics } from '../../../../src/product/reload/config-metrics';
import { createInventoryMetrics } from '../../../../src/inventory';
import { createNotificationMetrics } from '../../../../src/notifications/notification-metrics';
import { enforceLabelAllowlist, LabelAllowlist, OTHER } from '../../../../src/shared/metrics/metric-labels';

/** CONTRACT §6 (issue 42): every label of every metric takes values from a closed set; anything else is `other`. */
describe('LabelAllowlist', () => {
  const allowlist = new LabelAllowlist({ plan: ['free', 'pro'], route: ['/v1/pets'] });

  it('keeps the values of each closed set and counts anything else as other', () => {
    expect(allowlist.close({ method: 'GET', route: '/v1/pets', status_code: '200', plan: 'pro' })).toEqual({
      method: 'GET',
      route: '/v1/pets',
      status_code: '200',
      plan: 'pro',
    });
    expect(allowlist.close({ method: 'BREW', route: '/v1/pets/123', status_code: '299', plan: 'gold' })).toEqual({
      method: OTHER,
      route: OTHER,
      status_code: OTHER,
      plan: OTHER,
    });
    expect(allowlist.value('method', 'get')).toBe(OTHER);
    expect(allowlist.value('method', 'PROPFIND')).toBe(OTHER);
    expect(allowlist.value('plan', 'anonymous')).toBe('anonymous');
    expect(allowlist.value('hash', 'a'.repeat(64))).toBe('a'.repeat(64));
    expect(allowlist.value('hash', 'secret')).toBe(OTHER);
    expect(allowlist.value('code', 'SQLITE_IOERR_WRITE')).toBe('SQLITE_IOERR_WRITE');
    expect(allowlist.value('code', 'SQLITE_MADE_UP')).toBe(OTHER);
    expect(allowlist.value('no_such_label', 'x')).toBe(OTHER);
  });

  it('returns the same object when nothing needs closing, so the request path allocates nothing', () => {
    const labels = { method: 'POST', route: '/v1/pets', status_code: '201', plan: 'free' };
    expect(allowlist.close(labels)).toBe(labels);
  });

  it('follows the config in force: a plan added by a reload is kept, a removed one is other from then on', () => {
    let inForce = { plans: ['free'] };
    let madeSets = 0;
    const reloaded = LabelAllowlist.following(
      () => inForce,
      (config) => {
        madeSets += 1;
        return { plan: config.plans };
      },
    );
    expect(reloaded.value('plan', 'gold')).toBe(OTHER);
    expect(reloaded.value('plan', 'free')).toBe('free');
    // A reload puts another config in force; the allowlist is told nothing.
    inForce = { plans: ['gold'] };
    expect(reloaded.value('plan', 'gold')).toBe('gold');
    expect(reloaded.value('plan', 'free')).toBe(OTHER);
    expect(reloaded.value('plan', 'anonymous')).toBe('anonymous');
    // The sets are made once per config, not once per value.
    expect(madeSets).toBe(2);
  });
});

describe('enforceLabelAllowlist', () => {
  const sampleLines = async (registry: Registry, name: string) =>
    (await registry.getSingleMetricAsString(name)).split('\n').filter((line) => line.startsWith(name));

  it('knows every label of every metric the gateway, its key store, its reloads, its webhooks and the inventory register', () => {
    const registry = new Registry();
    const metrics = createGatewayMetrics(registry);
    createKeyDurabilityMetrics().register(registry);
    createConfigMetrics(registry);
    createNotificationMetrics(registry, async () => 0);
    const inventory = createInventoryMetrics(new Registry());
    expect(() => enforceLabelAllowlist(metrics.registry, new LabelAllowlist())).not.toThrow();
    expect(() => enforceLabelAllowlist(inventory.registry, new LabelAllowlist())).not.toThrow();
    // Every delivery series is made at 0 at start: each must be its own, none `other`.
    expect(new LabelAllowlist().close({ event: 'key.expiring', result: 'dropped' })).toEqual({
      event: 'key.expiring',
      result: 'dropped',
    });
  });

  it('refuses, at start, a metric with a label that has no closed set', () => {
    const registry = new Registry();
    new Counter({ name: 'made_up_total', help: 'x', labelNames: ['customer'] as const, registers: [registry] });
    expect(() => enforceLabelAllowlist(registry, new LabelAllowlist())).toThrow(
      /made_up_total has labels with no closed set.*customer/,
    );
  });

  it('closes what counters, gauges and histograms are given, by object and by position, timers included', async () => {
    const registry = new Registry();
    const counter = new Counter({ name: 'c_total', help: 'x', labelNames: ['method'] as const, registers: [registry] });
    const gauge = new Gauge({ name: 'g', help: 'x', labelNames: ['method'] as const, registers: [registry] });
    const histogram = new Histogram({
      name: 'h_seconds',
      help: 'x',
      labelNames: ['method'] as const,
      buckets: [1],
      registers: [registry],
    });
    enforceLabelAllowlist(registry, new LabelAllowlist());
    enforceLabelAllowlist(registry, new LabelAllowlist());
    for (let i = 0; i < 50; i++) {
      counter.inc({ method: `M${i}` });
      counter.labels(`L${i}`).inc();
      gauge.set({ method: `M${i}` }, i);
      gauge.labels({ method: `L${i}` }).inc();
      histogram.observe({ method: `M${i}` }, 0.5);
      histogram.labels(`L${i}`).observe(0.5);
      histogram.startTimer({ method: `T${i}` })();
      histogram.zero({ method: `Z${i}` });
    }
    histogram.zero({ method: 'HEAD' });
    counter.inc({ method: 'GET' });
    expect(await sampleLines(registry, 'c_total')).toEqual(['c_total{method="other"} 100', 'c_total{method="GET"} 1']);
    expect(await sampleLines(registry, 'g')).toEqual(['g{method="other"} 50']);
    expect((await sampleLines(registry, 'h_seconds')).filter((line) => line.startsWith('h_seconds_count'))).toEqual([
      'h_seconds_count{method="other"} 150',
      'h_seconds_count{method="HEAD"} 0',
    ]);
  });
});
