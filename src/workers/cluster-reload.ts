import cluster, { type Worker } from 'node:cluster';
import type { Registry } from 'prom-client';
import { loadConfig, type Config, type LastReload, type ReloadOutcome } from '../shared/config';
import type { Logger } from '../shared/logger';
import type { TlsPair } from '../shared/http/tls-pair';
import type { RunningProduct } from '../product';
import type { ConfigState } from '../product/reload/config-state';
import { ConfigReloader } from '../product/reload/reloader';
import { createConfigMetrics } from '../product/reload/config-metrics';
import { planRemovalProblems } from '../product/reload/plan-check';
import { planUsersOfWorkers } from './cluster-plan-use';
import { fromSupervisor, ipcRequests } from './ipc-request';
import { isMessage, type PairMessage, type SupervisorMessage, type WorkerMessage } from './messages';

/** A worker that has not applied a config by then is logged; the others serve under it already. */
const APPLY_TIMEOUT_MS = 5000;
/** The worker's own wait for the supervisor's answer to POST /admin/reload. */
const ANSWER_TIMEOUT_MS = APPLY_TIMEOUT_MS + 5000;

type ApplyConfig = Extract<SupervisorMessage, { type: 'asg:apply-config' }>;
type Reloaded = Extract<SupervisorMessage, { type: 'asg:reloaded' }>;

const livingWorkers = () =>
  Object.values(cluster.workers ?? {}).filter((w): w is Worker => w !== undefined && w.isConnected());

function pairMessage(pair: TlsPair | null): PairMessage | null {
  return (
    pair && {
      cert: pair.cert.toString('utf8'),
      key: pair.key.toString('utf8'),
      fingerprint: pair.fingerprint,
      validTo: pair.validTo,
    }
  );
}

/**
 * Supervisor side: SIGHUP and every worker's POST /admin/reload come here. The config and the TLS
 * files are read and validated once, in this process; a valid result goes to every worker, and
 * the reload answers once all of them serve under it. A worker started later (a replacement) is
 * handed the config in force when it is ready. Counted in gateway_config_reloads_total here, once
 * per attempt however many workers there are.
 */
export function superviseReloads(state: ConfigState, log: Logger, registry: Registry) {
  let nextApply = 0;
  // Sent to each worker as it becomes ready: the config in force as the supervisor loaded it (a
  // worker's own differs by the INVENTORY_URL it is handed), so that every worker shows one hash.
  let latest: Omit<ApplyConfig, 'id'> = { type: 'asg:apply-config', config: state.config, pair: null, last: null };
  const waiting = new Map<number, { workers: Set<Worker>; done(): void }>();

  const applyEverywhere = (inForce: Config, pair: TlsPair | null, last: LastReload): Promise<void> => {
    latest = { type: 'asg:apply-config', config: inForce, pair: pairMessage(pair), last };
    const id = nextApply++;
    const workers = new Set(livingWorkers());
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        log.error({ workers: [...workers].map((w) => w.id) }, 'workers did not confirm the reloaded config in time');
        entry.done();
      }, APPLY_TIMEOUT_MS);
      const entry = {
        workers,
        done: () => {
          clearTimeout(timer);
          waiting.delete(id);
          resolve();
        },
      };
      waiting.set(id, entry);
      for (const worker of workers) worker.send({ ...latest, id } satisfies SupervisorMessage);
      if (workers.size === 0) entry.done();
    });
  };
  const planUsers = planUsersOfWorkers(['key']);
  const reloader = new ConfigReloader({
    state,
    load: () => loadConfig(),
    apply: applyEverywhere,
    vet: (current, next) => planRemovalProblems(current, next, planUsers),
    metrics: createConfigMetrics(registry),
    logger: log,
  });

  cluster.on('message', (worker, message: unknown) => {
    if (isMessage<Extract<WorkerMessage, { type: 'asg:config-applied' }>>(message, 'asg:config-applied')) {
      const entry = waiting.get(message.id);
      if (entry?.workers.delete(worker) && entry.workers.size === 0) entry.done();
    } else if (isMessage<Extract<WorkerMessage, { type: 'asg:reload' }>>(message, 'asg:reload')) {
      void reloader.reload('POST /admin/reload').then((outcome) => {
        if (worker.isConnected())
          worker.send({ type: 'asg:reloaded', id: message.id, outcome } satisfies SupervisorMessage);
      });
    }
  });
  return {
    reload: (trigger: string) => reloader.reload(trigger),
    /** A worker that starts (or is replaced) after a reload serves under the config in force, not the one it loaded. */
    onWorkerReady(worker: Worker): void {
      worker.send({ ...latest, last: state.view().lastReload, id: nextApply++ } satisfies SupervisorMessage);
    },
  };
}

/** Worker side of POST /admin/reload: the supervisor reloads for every worker. */
export function reloadThroughSupervisor(): (trigger: string) => Promise<ReloadOutcome> {
  const answers = ipcRequests<Reloaded>({
    answerType: 'asg:reloaded',
    listen: fromSupervisor,
    timeoutMs: ANSWER_TIMEOUT_MS,
    timeoutMessage: 'the supervisor did not answer the reload',
  });
  return async () =>
    (await answers.ask((id) => process.send!({ type: 'asg:reload', id } satisfies WorkerMessage))).outcome;
}

/** Worker side: applies what the supervisor validated, then says so. */
export function applyConfigsFromSupervisor(running: RunningProduct): void {
  process.on('message', (message: unknown) => {
    if (!isMessage<ApplyConfig>(message, 'asg:apply-config')) return;
    const pair = message.pair && {
      ...message.pair,
      cert: Buffer.from(message.pair.cert),
      key: Buffer.from(message.pair.key),
    };
    running.applyConfig(message.config, pair);
    running.configState.record(message.last, message.config);
    process.send!({ type: 'asg:config-applied', id: message.id } satisfies WorkerMessage);
  });
}
