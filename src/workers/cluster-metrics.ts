import cluster from 'node:cluster';
import { AggregatorRegistry, type Registry } from 'prom-client';
import type { MetricsSource } from '../admin/app';
import { fromSupervisor, ipcRequests } from './ipc-request';
import { isMessage, type SupervisorMessage, type WorkerMessage } from './messages';

/** Longer than prom-client's own 5 s wait for every worker's answer. */
const ANSWER_TIMEOUT_MS = 6000;

/**
 * Supervisor side. A scrape reaches one worker (they share the admin listener); that worker asks
 * here, and prom-client's AggregatorRegistry asks every worker for its registry and sums them
 * (counters and histograms summed, gauges by each one's `aggregator`). The supervisor's own
 * registries (the embedded inventory's) are served beside the sum.
 */
export function answerClusterMetrics(supervisorRegistries: Registry[]): void {
  const aggregator = new AggregatorRegistry();
  cluster.on('message', (worker, message: unknown) => {
    if (!isMessage<Extract<WorkerMessage, { type: 'asg:metrics' }>>(message, 'asg:metrics')) return;
    const reply = (answer: Omit<Extract<SupervisorMessage, { type: 'asg:metrics' }>, 'type' | 'id'>) => {
      if (worker.isConnected())
        worker.send({ type: 'asg:metrics', id: message.id, ...answer } satisfies SupervisorMessage);
    };
    Promise.all([aggregator.clusterMetrics(), ...supervisorRegistries.map((registry) => registry.metrics())]).then(
      (parts) => reply({ text: parts.filter((part) => part.length > 0).join('\n') }),
      (err: Error) => reply({ error: err.message }),
    );
  });
}

/**
 * Worker side: offers this worker's registry to the supervisor's sum, and serves that sum as this
 * worker's /metrics, so a scrape gets the whole process whichever worker answers it.
 */
export function clusterMetricsSource(registry: Registry): MetricsSource {
  // Constructing one installs prom-client's listener that answers the supervisor with our registry.
  new AggregatorRegistry();
  AggregatorRegistry.setRegistries([registry]);
  const sums = ipcRequests<Extract<SupervisorMessage, { type: 'asg:metrics' }>>({
    answerType: 'asg:metrics',
    listen: fromSupervisor,
    timeoutMs: ANSWER_TIMEOUT_MS,
    timeoutMessage: 'the supervisor did not answer with the summed metrics',
  });
  return {
    contentType: registry.contentType,
    text: async () => {
      const answer = await sums.ask((id) => process.send!({ type: 'asg:metrics', id } satisfies WorkerMessage));
      if (answer.error !== undefined) throw new Error(`summing the workers' metrics failed: ${answer.error}`);
      return answer.text ?? '';
    },
  };
}
