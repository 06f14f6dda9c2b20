import cluster, { type Worker } from 'node:cluster';
import { sumSeconds } from '../admin/stats/stats-report';
import type { TrafficRecorder, TrafficSecond } from '../admin/stats/traffic-recorder';
import { fromSupervisor, ipcRequests } from './ipc-request';
import { isMessage, type SupervisorMessage, type WorkerMessage } from './messages';

/** A worker that has not answered by then is left out of the sum rather than stalling the console. */
const COLLECT_TIMEOUT_MS = 1000;
/** The worker's own wait for the supervisor's sum. */
const ANSWER_TIMEOUT_MS = 3000;

type StatsAsk = Extract<WorkerMessage, { type: 'asg:stats' }>;
type StatsPart = Extract<WorkerMessage, { type: 'asg:stats-part' }>;

/**
 * Supervisor side of GET /admin/stats under WORKERS > 1, as for /metrics: the worker that got the
 * request asks here, every live worker sends its recorder's seconds, and the sum goes back.
 */
export function answerClusterStats(): void {
  let nextCollection = 0;
  const collections = new Map<number, { parts: TrafficSecond[][]; waitingFor: Set<Worker>; done(): void }>();

  cluster.on('message', (worker, message: unknown) => {
    if (isMessage<StatsPart>(message, 'asg:stats-part')) {
      const collection = collections.get(message.id);
      if (!collection || !collection.waitingFor.delete(worker)) return;
      collection.parts.push(message.seconds);
      if (collection.waitingFor.size === 0) collection.done();
      return;
    }
    if (!isMessage<StatsAsk>(message, 'asg:stats')) return;
    const id = nextCollection++;
    const workers = Object.values(cluster.workers ?? {}).filter((w): w is Worker => w !== undefined && w.isConnected());
    const collection = { parts: [] as TrafficSecond[][], waitingFor: new Set(workers), done: () => {} };
    const timer = setTimeout(() => collection.done(), COLLECT_TIMEOUT_MS);
    collection.done = () => {
      clearTimeout(timer);
      collections.delete(id);
      if (worker.isConnected())
        worker.send({
          type: 'asg:stats',
          id: message.id,
          seconds: sumSeconds(collection.parts),
        } satisfies SupervisorMessage);
    };
    collections.set(id, collection);
    for (const w of workers) w.send({ type: 'asg:stats-collect', id } satisfies SupervisorMessage);
  });
}

/** Worker side: sends this worker's seconds when collected, and asks for every worker's sum. */
export function clusterTrafficSource(recorder: TrafficRecorder): () => Promise<TrafficSecond[]> {
  process.on('message', (message: unknown) => {
    if (isMessage<Extract<SupervisorMessage, { type: 'asg:stats-collect' }>>(message, 'asg:stats-collect')) {
      process.send!({ type: 'asg:stats-part', id: message.id, seconds: recorder.seconds() } satisfies WorkerMessage);
    }
  });
  const sums = ipcRequests<Extract<SupervisorMessage, { type: 'asg:stats' }>>({
    answerType: 'asg:stats',
    listen: fromSupervisor,
    timeoutMs: ANSWER_TIMEOUT_MS,
    timeoutMessage: 'the supervisor did not answer with the summed traffic',
  });
  return async () => (await sums.ask((id) => process.send!({ type: 'asg:stats', id } satisfies WorkerMessage))).seconds;
}
