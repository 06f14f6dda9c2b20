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
 * Returns the letting go; calling it again does nothing. Only a response something waits on
 * (`afterRequestIsOver`, taken before the guard) is held.
 */
export function holdUntilUpstreamGone(res: ServerResponse): () => void {
  const holds = holdsOf.get(res);
  // Nothing waits on this response (a key without maxInFlight: most requests): no hold to keep, and
  // nothing allocated per request on the path.
  if (!holds) return LET_GO_OF_NOTHING;
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

const LET_GO_OF_NOTHING = (): void => {};

/**
 * Runs `then` once the request is over for what it holds: its response closed (answered, cut off,
 * or its client gone, before this was called included) and every hold on it let go. Called before
 * the request reaches the guard (limit-key.ts decides before forward.ts), so that the guard knows
 * this response has something waiting and keeps a hold on it.
 */
export function afterRequestIsOver(res: ServerResponse, then: () => void): void {
  let holds = holdsOf.get(res);
  if (!holds) {
    holds = { count: 0, waiting: [] };
    holdsOf.set(res, holds);
  }
  const waitedOn = holds;
  onceClosed(res, () => {
    if (waitedOn.count === 0) then();
    else waitedOn.waiting.push(then);
  });
}
