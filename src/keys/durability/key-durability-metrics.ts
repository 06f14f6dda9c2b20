import { Counter, Gauge, type Registry } from 'prom-client';

/**
 * The metrics of key durability, made before the gateway's registry exists (the key store opens
 * first) and registered on it afterwards with `register`.
 */
export function createKeyDurabilityMetrics() {
  const dataLoss = new Counter({
    name: 'gateway_store_data_loss_total',
    help: 'Times Redis was found to have lost key records and this instance wrote them back from its durable copy under DATA_DIR.',
    labelNames: ['reason'] as const,
    registers: [],
  });
  const restoredRecords = new Counter({
    name: 'gateway_store_restored_key_records_total',
    help: 'Key records written back into Redis after a data loss.',
    registers: [],
  });
  const dataAtRisk = new Gauge({
    name: 'gateway_store_data_at_risk',
    help: 'Redis settings seen at startup that can lose key records: 1 at risk, 0 not; reason "unknown" when CONFIG GET was refused.',
    labelNames: ['reason'] as const,
    registers: [],
  });
  // Both reasons from the start, at 0: an alert's rate() needs the series before the first loss.
  for (const reason of ['marker_missing', 'records_missing']) dataLoss.inc({ reason }, 0);
  return {
    dataLoss,
    restoredRecords,
    dataAtRisk,
    register(registry: Registry): void {
      for (const metric of [dataLoss, restoredRecords, dataAtRisk]) registry.registerMetric(metric);
    },
  };
}

export type KeyDurabilityMetrics = ReturnType<typeof createKeyDurabilityMetrics>;
