import cluster, { type Worker } from 'node:cluster';
import type { PlanUse, PlanUsers } from '../keys/plan-users';
import type { RunningProduct } from '../product';
import { fromWorkers, ipcRequests } from './ipc-request';
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
  const answers = ipcRequests<Answer>({
    answerType: 'asg:plan-use',
    listen: fromWorkers,
    timeoutMs: ANSWER_TIMEOUT_MS,
    timeoutMessage: `no worker answered within ${ANSWER_TIMEOUT_MS / 1000} s`,
  });
  const ask = async (kind: string, plans: readonly string[]): Promise<Map<string, PlanUse>> => {
    const worker = Object.values(cluster.workers ?? {}).find((w): w is Worker => w !== undefined && w.isConnected());
    if (!worker) throw new Error('no worker is running to ask');
    const answer = await answers.ask((id) =>
      worker.send({ type: 'asg:plan-use', id, kind, plans: [...plans] } satisfies SupervisorMessage),
    );
    if (answer.error !== undefined) throw new Error(answer.error);
    return new Map(answer.uses ?? []);
  };
  return kinds.map((kind) => ({ kind, plansInUse: (plans) => ask(kind, plans) }));
}

/** Worker side: answers the supervisor's asg:plan-use from this worker's own plan users. */
export function answerPlanUse(running: Pick<RunningProduct, 'planUsers'>): void {
  process.on('message', (message: unknown) => {
    if (!isMessage<Question>(message, 'asg:plan-use')) return;
    const users = running.planUsers.find((candidate) => candidate.kind === message.kind);
    const answered = users
      ? users.plansInUse(message.plans)
      : Promise.reject(new Error(`no ${message.kind} store here`));
    answered.then(
      (uses) => process.send!({ type: 'asg:plan-use', id: message.id, uses: [...uses] } satisfies WorkerMessage),
      (err: Error) =>
        process.send!({ type: 'asg:plan-use', id: message.id, error: err.message } satisfies WorkerMessage),
    );
  });
}
