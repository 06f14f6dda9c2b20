import cluster from 'node:cluster';
import type { Config } from '../shared/config';
import type { Logger } from '../shared/logger';
import { startProduct } from '../product';
import { createStopper, greetDeveloper, startupFailureLine, stopOnSignals } from '../lifecycle';
import { clusterMetricsSource } from './cluster-metrics';
import { clusterTrafficSource } from './cluster-stats';
import { applyConfigsFromSupervisor, reloadThroughSupervisor } from './cluster-reload';
import { answerPlanUse } from './cluster-plan-use';
import { isMessage, type SupervisorMessage, type WorkerMessage } from './messages';

function tell(message: WorkerMessage, then?: () => void): void {
  process.send!(message, undefined, undefined, then);
}

/**
 * One worker under the supervisor: the whole product but the inventory (the supervisor runs the
 * embedded one and passes its URL as INVENTORY_URL), its /metrics answered with every worker's sum.
 */
export async function runWorker(config: Config, logger: Logger, workers: number): Promise<void> {
  const workerLogger = logger.child({ worker: cluster.worker!.id });
  let product;
  try {
    product = await startProduct(config, {
      logger: workerLogger,
      metricsSource: clusterMetricsSource,
      trafficSource: clusterTrafficSource,
      reload: reloadThroughSupervisor(),
    });
  } catch (err) {
    // The supervisor prints it, once for all workers.
    tell({ type: 'asg:startup-failed', line: startupFailureLine(err) }, () => process.exit(1));
    return;
  }
  const running = product;
  const stop = createStopper(() => running.close(), workerLogger, config.server.shutdownTimeoutMs);
  stopOnSignals(stop);
  applyConfigsFromSupervisor(running);
  answerPlanUse(running);
  // SIGHUP is the supervisor's to act on (it reloads for every worker); one sent to the whole process group changes nothing here.
  process.on('SIGHUP', () => undefined);
  process.on('message', (message: unknown) => {
    if (isMessage<SupervisorMessage>(message, 'asg:stop')) stop('supervisor', { signal: false });
    if (isMessage<SupervisorMessage>(message, 'asg:greet')) {
      greetDeveloper(config, running, workers).catch((err: Error) =>
        workerLogger.error({ err }, 'could not greet the developer'),
      );
    }
  });
  tell({ type: 'asg:ready', gatewayUrl: running.gatewayUrl, adminUrl: running.adminUrl });
}
