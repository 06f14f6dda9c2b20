/** What the deadline timer watches: a deadline on process.hrtime.bigint()'s clock, and what to do when it passes. */
export interface Deadlined {
  readonly deadlineAt: bigint;
  deadlinePassed(): void;
}

/** No timer armed. */
const NONE = BigInt(Number.MAX_SAFE_INTEGER) * 1_000_000n;

/**
 * One timer for every deadline a forwarder's guard holds (issue 41), instead of a timer and its
 * closure per request: a request is added and deleted from a Set, and the one timer is armed for the
 * earliest deadline. The timeout is the same for every request and counted from its arrival, so a
 * new request's deadline is almost always later than the one armed: it re-arms only when it is
 * earlier (a request that waited longer before the forward). When the timer fires it answers every
 * request whose deadline has passed and arms again for the earliest left; a request answered before
 * its deadline is only deleted from the Set, and the timer, once it fires with nothing due, moves on.
 * Under steady traffic that is about one timer per timeoutMs rather than one per request.
 *
 * Nothing is late by design: each request is answered at its own deadline, as with its own timer
 * (Node's timers fire on the millisecond; a timer firing a fraction of a millisecond before the
 * deadline arms again for it, at most 1 ms later). A scan is over the requests held, which the guard
 * bounds (maxSockets + maxPending).
 */
export class DeadlineTimer<T extends Deadlined> {
  private readonly held = new Set<T>();
  private timer: NodeJS.Timeout | null = null;
  private armedAt = NONE;

  add(item: T): void {
    this.held.add(item);
    if (item.deadlineAt < this.armedAt) this.arm(item.deadlineAt);
  }

  delete(item: T): void {
    this.held.delete(item);
  }

  get size(): number {
    return this.held.size;
  }

  private arm(at: bigint): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.armedAt = at;
    const delayMs = Number(at - process.hrtime.bigint()) / 1e6;
    this.timer = setTimeout(() => this.fire(), Math.max(1, Math.ceil(delayMs)));
    // It may outlive the requests it was armed for (it is not cleared when they end): it keeps no
    // process alive on its own, the connections of the requests it watches do.
    this.timer.unref();
  }

  private fire(): void {
    this.timer = null;
    this.armedAt = NONE;
    const now = process.hrtime.bigint();
    let next = NONE;
    // A request answered here leaves the Set (deadlinePassed ends its hold); one added meanwhile is visited too.
    for (const item of this.held) {
      if (item.deadlineAt <= now) item.deadlinePassed();
      else if (item.deadlineAt < next) next = item.deadlineAt;
    }
    if (next < this.armedAt) this.arm(next);
  }
}
