import { Counter, Histogram, Registry } from 'prom-client';
import { CounterTally, HistogramTally } from '../../../../src/shared/metrics/metric-tally';
import { enforceLabelAllowlist, LabelAllowlist, OTHER } from '../../../../src/shared/metrics/metric-labels';

const BUCKETS = [0.001, 0.01, 0.1, 1];

/** The same observations through prom-client's own observe() and through a tally: /metrics must read the same. */
describe('metric tallies', () => {
  const observations: Array<[string, string, string, number]> = [
    ['GET', '/v1/pets', '200', 0.0004],
    ['POST', '/v1/pets', '201', 0.0123],
    ['GET', '/v1/pets', '200', 0.0731],
    ['GET', '/v1/pets/{id}', '404', 2.5],
    ['GET', '/v1/pets', '200', 0.3],
    ['POST', '/v1/pets', '201', 0.00071],
  ];

  it('a histogram tally exports what prom-client observe() does, byte for byte', async () => {
    const direct = new Registry();
    const histogram = new Histogram({
      name: 'h',
      help: 'h.',
      labelNames: ['method', 'route', 'status_code'] as const,
      buckets: BUCKETS,
      registers: [direct],
    });
    for (const [method, route, status_code, value] of observations)
      histogram.observe({ method, route, status_code }, value);

    const tallied = new Registry();
    const tally = new HistogramTally({
      name: 'h',
      help: 'h.',
      labelNames: ['method', 'route', 'status_code'] as const,
      buckets: BUCKETS,
      registers: [tallied],
    });
    for (const [method, route, status, value] of observations) tally.observe([method, route, status], value);

    expect(await tallied.metrics()).toBe(await direct.metrics());
    // Again after more observations: the scrape writes totals, not deltas.
    histogram.observe({ method: 'GET', route: '/v1/pets', status_code: '200' }, 0.002);
    tally.observe(['GET', '/v1/pets', '200'], 0.002);
    expect(await tallied.metrics()).toBe(await direct.metrics());
  });

  it('a counter tally exports what prom-client inc() does, series in the order they first occurred', async () => {
    const direct = new Registry();
    const counter = new Counter({ name: 'c', help: 'c.', labelNames: ['route', 'plan'] as const, registers: [direct] });
    const tallied = new Registry();
    const tally = new CounterTally({
      name: 'c',
      help: 'c.',
      labelNames: ['route', 'plan'] as const,
      registers: [tallied],
    });
    const counts: Array<[string, string, number]> = [
      ['/v1/pets', 'pro', 2],
      ['/v1/pets/{id}', 'free', 1],
      ['/v1/pets', 'pro', 3],
    ];
    for (const [route, plan, amount] of counts) {
      counter.inc({ route, plan }, amount);
      tally.add([route, plan], amount);
    }
    // A caller off the request path counting on the metric itself, between tallied series.
    counter.inc({ route: 'unmatched', plan: 'anonymous' });
    tally.metric.inc({ route: 'unmatched', plan: 'anonymous' });
    counter.inc({ route: '/v1/pets', plan: 'enterprise' });
    tally.add(['/v1/pets', 'enterprise']);

    expect(await tallied.metrics()).toBe(await direct.metrics());
    tally.add(['/v1/pets', 'pro']);
    counter.inc({ route: '/v1/pets', plan: 'pro' });
    expect(await tallied.metrics()).toBe(await direct.metrics());
  });

  it('closes values outside their sets as the allowlist does, without indexing them', async () => {
    const registry = new Registry();
    const tally = new CounterTally({
      name: 'c',
      help: 'c.',
      labelNames: ['method', 'plan'] as const,
      registers: [registry],
    });
    let plans = { plan: ['pro'] };
    enforceLabelAllowlist(registry, new LabelAllowlist(() => plans));
    tally.add(['GET', 'pro']);
    tally.add(['BREW', 'pro']);
    tally.add(['BREW2', 'pro']);
    expect((await tally.metric.get()).values.map((v) => [v.labels, v.value])).toEqual([
      [{ method: 'GET', plan: 'pro' }, 1],
      [{ method: OTHER, plan: 'pro' }, 2],
    ]);
    // A reload that removes the plan: the series made stays, new requests of that plan are OTHER.
    plans = { plan: ['free'] };
    tally.add(['GET', 'pro']);
    expect((await tally.metric.get()).values.map((v) => [v.labels, v.value])).toEqual([
      [{ method: 'GET', plan: 'pro' }, 1],
      [{ method: OTHER, plan: 'pro' }, 2],
      [{ method: 'GET', plan: OTHER }, 1],
    ]);
  });
});
