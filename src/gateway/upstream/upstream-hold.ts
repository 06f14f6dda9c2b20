import type { ServerResponse } from 'node:http';
import { onceClosed } from '../cut-off';

/** The holds taken on one response, and what waits for the last of them to go. */
interface Holds {
  count: number;
  waiting: Array<() => void>;
}

const holdsOf = new WeakMap<ServerResponse, Holds>();

/**
 * Keeps what a request holds outside the guard (its `maxInFlight` slot) until its upstream request
 * is gone (CONTRACT §3). The guard takes a hold when it takes the request and lets go once the
 * request is over and its upstream request has left the inventory (answered, failed, or aborted
 * with its connection). A client that cancels its stream then gets its slot back no sooner than
 * the pool gets the connection: cancelled streams cannot put more of a key's requests at the
 * inventory than its maxInFlight (issue 48: 40 at once under `maxInFlight: 2`).
 *
 * Returns the letting go; calling it again does nothing.
 */
export function holdUntilUpstreamGone(res: ServerResponse): () => void {
  let holds = holdsOf.get(res);
  if (!holds) {
    holds = { count: 0, waiting: [] };
    holdsOf.set(res, holds);
  }
  holds.count++;
  let released = false;
  return () => {
    if (released) return;
    released = true;
    if (--holds.count > 0) return;
    const waiting = holds.waiting;
    holds.waiting = [];
    for (const then of waiting) then();
  };
}

/**
 * Runs `then` once the request is over for what it holds: its response closed (answered, cut off,
 * or its client gone, before this was called included) and every hold on it let go.
 */
export function afterRequestIsOver(res: ServerResponse, then: () => void): void {
  onceClosed(res, () => {
    const holds = holdsOf.get(res);
    if (!holds || holds.count === 0) then();
    else holds.waiting.push(then);
  });
}
