import { Counter, Gauge, type Registry } from 'prom-client';

/** gateway_config_reloads_total{result} and gateway_config_info{hash}, owned by the process that reloads. */
export function createConfigMetrics(registry: Registry) {
  const reloads = new Counter({
    name: 'gateway_config_reloads_total',
    help: 'Reload attempts (SIGHUP or POST /admin/reload), by result: success or failure.',
    labelNames: ['result'] as const,
    registers: [registry],
  });
  reloads.inc({ result: 'success' }, 0);
  reloads.inc({ result: 'failure' }, 0);
  const info = new Gauge({
    name: 'gateway_config_info',
    help: 'Always 1, labelled with the hash of the config in force (GET /admin/config).',
    labelNames: ['hash'] as const,
    registers: [registry],
    aggregator: 'first',
  });
  return {
    reloads,
    /** One sample, for the hash in force: the previous hash's sample goes. */
    setHash(hash: string): void {
      info.reset();
      info.set({ hash }, 1);
    },
  };
}

export type ConfigMetrics = ReturnType<typeof createConfigMetrics>;
