/**
 * The requests of one instance at or waiting for the inventory, shared fairly across keys
 * (CONTRACT §3, one caller cannot take the inventory from the others). Pure bookkeeping: the
 * guard (upstream-guard.ts) starts, refuses and times out the requests; this says which.
 *
 * - At most `activeLimit` are at the inventory (the pool's connections); the rest wait here, not
 *   in the pool's own queue, which is first come, first served.
 * - At most `bound` are held in all (at the inventory plus waiting). At the bound, a newcomer
 *   takes the place of the oldest waiting request of the key holding the most (among keys with a
 *   request waiting), when that key holds more than the newcomer's key and more than its fair
 *   share (bound ÷ keys holding any); otherwise the newcomer is the one refused. A key under its
 *   fair share is therefore refused for the bound only when every key over it has all its
 *   requests at the inventory already (nothing of theirs can give up a place): with maxPending
 *   at least maxSockets, as configured by default, the turn below keeps that from lasting.
 * - `newcomerReserve` connections are kept from any one key: a key may hold at most
 *   `activeLimit - newcomerReserve` of them. A key that has nothing at the inventory then finds a
 *   free connection at once, rather than waiting for one held by the loud key to come back (with
 *   an inventory answering in 1 s, up to 1 s): only a key alone loses that share, not the others.
 * - A freed place goes to the waiting key with the fewest requests at the inventory, in turn
 *   (round robin) among keys with as few, each key's own requests in arrival order: a key that
 *   holds every connection gets the next one only when no other key waits.
 */
export type Offer<T> =
  /**
   * Goes to the inventory now, or waits its turn; `evicted` is the waiting request of a heavier
   * key whose place it took at the bound (the caller refuses it).
   */
  | { outcome: 'start' | 'wait'; evicted: T | null }
  /** Refused: its own key holds the most, or nothing can make room. */
  | { outcome: 'refused' };

export class FairShareQueue<T> {
  /** Requests held per key, at the inventory and waiting; a key holding none has no entry. */
  private readonly held = new Map<string, number>();
  /** Waiting requests per key in arrival order; the Map's own order is the round robin's. */
  private readonly waiting = new Map<string, Set<T>>();
  /** Requests at the inventory per key; a key with none has no entry. */
  private readonly activeBy = new Map<string, number>();
  private heldCount = 0;
  private activeCount = 0;

  /** The connections one key may hold at once. */
  private readonly perKeyActiveLimit: number;

  constructor(
    private readonly activeLimit: number,
    private readonly bound: number,
    newcomerReserve = 0,
  ) {
    this.perKeyActiveLimit = Math.max(1, activeLimit - newcomerReserve);
  }

  /** A new request of `key`: start it, queue it (perhaps in another's place), or refuse it. */
  offer(key: string, item: T): Offer<T> {
    let evicted: T | null = null;
    if (this.heldCount >= this.bound) {
      const heaviest = this.heaviestWaitingKey();
      if (heaviest === null || !this.mayTakePlaceOf(key, heaviest)) return { outcome: 'refused' };
      evicted = this.takeOldest(heaviest)!;
      this.unhold(heaviest);
    }
    this.hold(key);
    // A free connection means every key still waiting holds its most already.
    if (this.activeCount < this.activeLimit && this.activeOf(key) < this.perKeyActiveLimit) {
      this.activate(key);
      return { outcome: 'start', evicted };
    }
    this.enqueue(key, item);
    return { outcome: 'wait', evicted };
  }

  /**
   * A request at the inventory is over: its place goes to the next key in turn, whose request
   * (returned, now counted at the inventory) the caller starts.
   */
  finish(key: string): T | null {
    this.unhold(key);
    const active = this.activeOf(key) - 1;
    if (active > 0) this.activeBy.set(key, active);
    else this.activeBy.delete(key);
    this.activeCount--;
    return this.startNext();
  }

  /** A waiting request leaves before its turn (its deadline passed, its client hung up); false if it was not waiting. */
  withdraw(key: string, item: T): boolean {
    const queue = this.waiting.get(key);
    if (!queue?.delete(item)) return false;
    if (queue.size === 0) this.waiting.delete(key);
    this.unhold(key);
    return true;
  }

  /** Every waiting request, removed (the inventory refused a connection: none of them would fare better). */
  drain(): Array<{ key: string; item: T }> {
    const drained: Array<{ key: string; item: T }> = [];
    for (const [key, queue] of this.waiting) {
      for (const item of queue) {
        drained.push({ key, item });
        this.unhold(key);
      }
    }
    this.waiting.clear();
    return drained;
  }

  /** Requests held (at the inventory plus waiting). */
  size(): number {
    return this.heldCount;
  }

  active(): number {
    return this.activeCount;
  }

  heldBy(key: string): number {
    return this.held.get(key) ?? 0;
  }

  private startNext(): T | null {
    if (this.activeCount >= this.activeLimit) return null;
    const key = this.nextKeyInTurn();
    if (key === null) return null;
    const item = this.takeOldest(key)!;
    // The key served goes to the back of the turn, if it still waits.
    const rest = this.waiting.get(key);
    if (rest) {
      this.waiting.delete(key);
      this.waiting.set(key, rest);
    }
    this.activate(key);
    return item;
  }

  /**
   * The first waiting key, in turn, among those with the fewest requests at the inventory (and
   * fewer than one key's most); null when every waiting key holds its most. A scan
   * over the keys waiting (at most `bound - activeLimit` of them), stopped early by one with none there.
   */
  private nextKeyInTurn(): string | null {
    let chosen: string | null = null;
    let fewest = Infinity;
    for (const key of this.waiting.keys()) {
      const active = this.activeOf(key);
      if (active < fewest && active < this.perKeyActiveLimit) {
        fewest = active;
        chosen = key;
        if (active === 0) break;
      }
    }
    return chosen;
  }

  private activeOf(key: string): number {
    return this.activeBy.get(key) ?? 0;
  }

  private activate(key: string): void {
    this.activeBy.set(key, this.activeOf(key) + 1);
    this.activeCount++;
  }

  private takeOldest(key: string): T | undefined {
    const queue = this.waiting.get(key);
    if (!queue) return undefined;
    const oldest = queue.values().next().value as T;
    queue.delete(oldest);
    if (queue.size === 0) this.waiting.delete(key);
    return oldest;
  }

  /**
   * Whether `key`'s newcomer may take a waiting place of `heaviest`: that key holds more than
   * `key` and more than its fair share (so places never swap back and forth between two keys
   * each holding less than theirs).
   */
  private mayTakePlaceOf(key: string, heaviest: string): boolean {
    const keysHolding = this.held.size + (this.held.has(key) ? 0 : 1);
    const most = this.heldBy(heaviest);
    return most > this.heldBy(key) && most * keysHolding > this.bound;
  }

  /**
   * The key holding the most among those with a request waiting (only a waiting request can give
   * up its place). A scan over the waiting keys, done only at the bound: there are at most `bound` of them.
   */
  private heaviestWaitingKey(): string | null {
    let heaviest: string | null = null;
    let most = 0;
    for (const key of this.waiting.keys()) {
      const count = this.heldBy(key);
      if (count > most) {
        most = count;
        heaviest = key;
      }
    }
    return heaviest;
  }

  private enqueue(key: string, item: T): void {
    const queue = this.waiting.get(key);
    if (queue) queue.add(item);
    else this.waiting.set(key, new Set([item]));
  }

  private hold(key: string): void {
    this.held.set(key, this.heldBy(key) + 1);
    this.heldCount++;
  }

  private unhold(key: string): void {
    const count = this.heldBy(key) - 1;
    if (count > 0) this.held.set(key, count);
    else this.held.delete(key);
    this.heldCount--;
  }
}
