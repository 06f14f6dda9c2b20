import cluster from 'node:cluster';

/** An answer carries the id of the request it answers. */
export interface IpcAnswer {
  type: string;
  id: number;
}

/** Where one side hears the other: a worker hears its supervisor, the supervisor every worker. */
export type IpcListen = (listener: (message: unknown) => void) => void;

export const fromSupervisor: IpcListen = (listener) => process.on('message', listener);
export const fromWorkers: IpcListen = (listener) =>
  cluster.on('message', (_worker, message: unknown) => listener(message));

export interface IpcRequestsOptions<Answer extends IpcAnswer> {
  /** The message type that answers a request (other messages, and answers to no request here, pass by). */
  answerType: Answer['type'];
  listen: IpcListen;
  timeoutMs: number;
  /** The error a request rejects with when no answer came in time. */
  timeoutMessage: string;
}

/**
 * The one request/answer helper between the supervisor and its workers: each request gets an id,
 * its answer is matched by that id, and a request nobody answers rejects after `timeoutMs` (and is
 * forgotten, so a late answer is dropped). `ask(send)` hands the id to `send`, which sends the
 * request however the asker reaches the other side (process.send, one worker, every worker).
 */
export function ipcRequests<Answer extends IpcAnswer>(
  options: IpcRequestsOptions<Answer>,
): { ask(send: (id: number) => void): Promise<Answer> } {
  const pending = new Map<number, { resolve(answer: Answer): void; timer: NodeJS.Timeout }>();
  let nextId = 0;
  options.listen((message) => {
    if (typeof message !== 'object' || message === null) return;
    const answer = message as Partial<Answer>;
    if (answer.type !== options.answerType || typeof answer.id !== 'number') return;
    const waiting = pending.get(answer.id);
    if (!waiting) return;
    pending.delete(answer.id);
    clearTimeout(waiting.timer);
    waiting.resolve(answer as Answer);
  });
  return {
    ask: (send) =>
      new Promise<Answer>((resolve, reject) => {
        const id = nextId++;
        const timer = setTimeout(() => {
          pending.delete(id);
          reject(new Error(options.timeoutMessage));
        }, options.timeoutMs);
        pending.set(id, { resolve, timer });
        try {
          send(id);
        } catch (err) {
          pending.delete(id);
          clearTimeout(timer);
          reject(err as Error);
        }
      }),
  };
}
