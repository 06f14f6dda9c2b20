import cluster, { type Worker } from 'node:cluster';
import type { PlanUse, PlanUsers } from '../keys/plan-users';
import type { RunningProduct } from '../product';
import { isMessage, type SupervisorMessage, type WorkerMessage } from './messages';

/** Longer than a listing of the key store takes; past it the reload is refused, naming why. */
const ANSWER_TIMEOUT_MS = 10_000;

type Question = Extract<SupervisorMessage, { type: 'asg:plan-use' }>;
type Answer = Extract<WorkerMessage, { type: 'asg:plan-use' }>;

/**
 * Supervisor side: the supervisor reloads for every worker but holds no store, so "does a key use
 * this plan?" goes to one living worker (every worker sees the same store). One PlanUsers per kind
 * of user, asked as the worker's own would be.
 */
export function planUsersOfWorkers(kinds: readonly string[]): PlanUsers[] {
  const waiting = new Map<number, { resolve(uses: Map<string, PlanUse>): void; reject(err: Error): void; timer: NodeJS.Timeout }>();
  let nextId = 0;
  cluster.on('message', (_worker, message: unknown) => {
    if (!isMessage<Answer>(message, 'asg:plan-use')) return;
    const entry = waiting.get(message.id);
    if (!entry) return;
    waiting.delete(message.id);
    clearTimeout(entry.timer);
    if (message.error !== undefined) entry.reject(new Error(message.error));
    else entry.resolve(new Map(message.uses ?? []));
  });
  const ask = (kind: string, plans: readonly string[]) =>
    new Promise<Map<string, PlanUse>>((resolve, reject) => {
      const worker = Object.values(cluster.workers ?? {}).find((w): w is Worker => w !== undefined && w.isConnected());
      if (!worker) return reject(new Error('no worker is running to ask'));
      const id = nextId++;
      const timer = setTimeout(() => {
        waiting.delete(id);
        reject(new Error(`no worker answered within ${ANSWER_TIMEOUT_MS / 1000} s`));
      }, ANSWER_TIMEOUT_MS);
      waiting.set(id, { resolve, reject, timer });
      worker.send({ type: 'asg:plan-use', id, kind, plans: [...plans] } satisfies SupervisorMessage);
    });
  return kinds.map((kind) => ({ kind, plansInUse: (plans) => ask(kind, plans) }));
}

/** Worker side: answers the supervisor's asg:plan-use from this worker's own plan users. */
export function answerPlanUse(running: Pick<RunningProduct, 'planUsers'>): void {
  process.on('message', (message: unknown) => {
    if (!isMessage<Question>(message, 'asg:plan-use')) return;
    const users = running.planUsers.find((candidate) => candidate.kind === message.kind);
    const answered = users ? users.plansInUse(message.plans) : Promise.reject(new Error(`no ${message.kind} store here`));
    answered.then(
      (uses) => process.send!({ type: 'asg:plan-use', id: message.id, uses: [...uses] } satisfies WorkerMessage),
      (err: Error) => process.send!({ type: 'asg:plan-use', id: message.id, error: err.message } satisfies WorkerMessage),
    );
  });
}
