import { performance } from 'node:perf_hooks';
import { DEFAULT_FALSE_POSITIVE_RATE, GrowingBloomFilter, randomSeeds, type HashMembership } from './hash-filter';
import type { IssuedMark, KeyChange, KeyStore, StoreIssuedMark } from '../types';

/** The store calls this needs: a shared store's marks, hashes and change stream. */
export type IssuedHashSource = Required<Pick<KeyStore, 'issuedMark' | 'scanIssuedHashes' | 'onChange'>> &
  Pick<KeyStore, 'onResync'>;

export function isIssuedHashSource(store: KeyStore): store is KeyStore & IssuedHashSource {
  return typeof store.issuedMark === 'function' && typeof store.scanIssuedHashes === 'function';
}

export interface IssuedKeysOptions {
  /**
   * Least time between two mark reads. Misses in between wait for the next read and share it. While
   * misses keep coming (BUSY_CHECK waiters or more on a read) the time doubles up to
   * maxCheckIntervalMs, so a flood of made-up keys costs the store at most 1000/maxCheckIntervalMs
   * commands a second per process; it drops back once a read has few waiters.
   */
  checkIntervalMs?: number;
  maxCheckIntervalMs?: number;
  /** How long a miss waits for changes the mark counts but the change stream has not brought yet. */
  catchUpTimeoutMs?: number;
  /** Least capacity of a rebuilt filter; it is sized for twice the store's hashes. */
  minCapacity?: number;
  falsePositiveRate?: number;
  /** Wait before a failed rebuild is tried again. */
  retryMs?: number;
  /** Each completed rebuild, for the log. */
  onRebuilt?(hashes: number, bytes: number, ms: number): void;
}

export const DEFAULT_CHECK_INTERVAL_MS = 100;
export const DEFAULT_MAX_CHECK_INTERVAL_MS = 1000;
/** Waiters on one mark read from which the misses count as a flood. */
const BUSY_CHECK = 10;
export const DEFAULT_CATCH_UP_TIMEOUT_MS = 250;
const DEFAULT_MIN_CAPACITY = 10_000;
const DEFAULT_RETRY_MS = 1000;

/** A filter with the mark up to which it has applied every change. */
interface View {
  filter: HashMembership;
  epoch: string;
  seq: number;
}

/**
 * A rebuild under way: the filter it fills (made once the mark says how many hashes there are;
 * changes before that wait in `early`), and the marks of the changes that came in meanwhile.
 */
interface Build {
  filter: HashMembership | null;
  early: string[];
  marks: IssuedMark[];
}

interface SeqWaiter {
  seq: number;
  resolve(reached: boolean): void;
}

/**
 * Which key hashes were ever issued (revoked, expired and rotated-away secrets included), held by
 * this process so that a key never issued is refused without a store command (CONTRACT §4).
 *
 * A Bloom filter, rebuilt from the store at start and after every resync and kept current by the
 * change stream every instance shares. A hash in the filter goes to the store as before (a false
 * positive costs one lookup). A hash not in it is declared never issued only once the filter is
 * proven current: a mark read from the store after the request arrived (so after any creation the
 * client could have learned the key from) counts no more writes than the filter has applied. A
 * creation still in flight on the change stream is waited for; while the filter cannot be proven
 * current (rebuilding, a gap in the stream, another epoch) every miss goes to the store.
 */
export class IssuedKeys {
  private view: View | null = null;
  private build: Build | null = null;
  private generation = 0;
  private waiters: SeqWaiter[] = [];
  /** Misses waiting for a mark read, by hash: the change stream bringing the hash ends the wait. */
  private readonly awaitingArrival = new Map<string, Array<() => void>>();
  private nextCheck: Promise<StoreIssuedMark> | null = null;
  private nextCheckWaiters = 0;
  private intervalMs: number;
  private lastCheckAt = Number.NEGATIVE_INFINITY;
  private retryTimer: NodeJS.Timeout | undefined;
  private firstBuild: Promise<void>;
  private readonly seeds = randomSeeds();
  private readonly unsubscribe: Array<() => void> = [];
  private closed = false;
  private readonly checkIntervalMs: number;
  private readonly maxCheckIntervalMs: number;
  private readonly catchUpTimeoutMs: number;

  constructor(
    private readonly source: IssuedHashSource,
    private readonly options: IssuedKeysOptions = {},
  ) {
    this.checkIntervalMs = options.checkIntervalMs ?? DEFAULT_CHECK_INTERVAL_MS;
    this.maxCheckIntervalMs = Math.max(
      this.checkIntervalMs,
      options.maxCheckIntervalMs ?? DEFAULT_MAX_CHECK_INTERVAL_MS,
    );
    this.intervalMs = this.checkIntervalMs;
    this.catchUpTimeoutMs = options.catchUpTimeoutMs ?? DEFAULT_CATCH_UP_TIMEOUT_MS;
    this.unsubscribe.push(source.onChange((change) => this.apply(change)));
    if (source.onResync) this.unsubscribe.push(source.onResync(() => this.rebuild()));
    this.firstBuild = this.rebuild();
  }

  /** Resolves once the first rebuild ended (done, or failed and retrying in the background). */
  ready(): Promise<void> {
    return this.firstBuild;
  }

  /** Whether misses can be decided locally now (false while rebuilding). */
  get current(): boolean {
    return this.view !== null;
  }

  /** Hashes and bytes of the filter in use; zero while none is. */
  get stats(): { hashes: number; bytes: number } {
    return { hashes: this.view?.filter.count ?? 0, bytes: this.view?.filter.bytes ?? 0 };
  }

  /**
   * True only when the hash was certainly never issued up to the moment this was called; false
   * means "ask the store". Costs no store command when the filter has the hash; otherwise it waits
   * for the next shared mark read (at most one per checkIntervalMs).
   */
  async neverIssued(hash: string): Promise<boolean> {
    if (!this.view || this.view.filter.has(hash)) return false;
    const mark = await this.markOrArrival(hash);
    if (mark === null) return false;
    let view = this.view as View | null;
    if (!view || view.filter.has(hash)) return false;
    if (mark.epoch !== view.epoch) {
      // The store lost its count (its data) or another count began: start over from the store.
      void this.rebuild();
      return false;
    }
    if (mark.seq > view.seq && !(await this.waitForSeq(mark.seq))) return false;
    view = this.view as View | null;
    return view !== null && view.epoch === mark.epoch && !view.filter.has(hash);
  }

  close(): void {
    this.closed = true;
    this.generation++;
    clearTimeout(this.retryTimer);
    for (const off of this.unsubscribe.splice(0)) off();
    this.release(Number.POSITIVE_INFINITY, false);
    this.view = null;
    this.build = null;
  }

  /**
   * The next mark read, or null as soon as the change stream brings this hash (a creation that
   * arrives first is looked up at once, not after the read) or the read fails.
   */
  private markOrArrival(hash: string): Promise<StoreIssuedMark | null> {
    return new Promise((resolve) => {
      const arrived = () => resolve(null);
      const waiting = this.awaitingArrival.get(hash);
      if (waiting) waiting.push(arrived);
      else this.awaitingArrival.set(hash, [arrived]);
      const done = () => {
        const list = this.awaitingArrival.get(hash);
        const rest = list?.filter((entry) => entry !== arrived) ?? [];
        if (rest.length > 0) this.awaitingArrival.set(hash, rest);
        else this.awaitingArrival.delete(hash);
      };
      this.markReadFromNow().then(
        (mark) => {
          done();
          resolve(mark);
        },
        () => {
          done();
          resolve(null);
        },
      );
    });
  }

  /**
   * A mark read that starts after this call: the one scheduled and not yet sent, or a new one sent
   * once checkIntervalMs has passed since the last. Every caller until it is sent shares it.
   */
  private markReadFromNow(): Promise<StoreIssuedMark> {
    if (this.nextCheck) {
      this.nextCheckWaiters++;
      return this.nextCheck;
    }
    const delay = Math.max(0, this.lastCheckAt + this.intervalMs - performance.now());
    const check: Promise<StoreIssuedMark> = new Promise((resolve) => setTimeout(resolve, delay)).then(() => {
      if (this.nextCheck === check) this.nextCheck = null;
      const busy = this.nextCheckWaiters >= BUSY_CHECK;
      this.intervalMs = busy ? Math.min(this.maxCheckIntervalMs, this.intervalMs * 2) : this.checkIntervalMs;
      this.lastCheckAt = performance.now();
      return this.source.issuedMark();
    });
    this.nextCheck = check;
    this.nextCheckWaiters = 1;
    return check;
  }

  private apply(change: KeyChange): void {
    const build = this.build;
    if (build) {
      if (build.filter) build.filter.add(change.hash);
      else build.early.push(change.hash);
      if (change.mark) build.marks.push(change.mark);
    }
    const arrivals = this.awaitingArrival.get(change.hash);
    if (arrivals) {
      this.awaitingArrival.delete(change.hash);
      for (const arrived of arrivals) arrived();
    }
    const view = this.view;
    if (!view) return;
    view.filter.add(change.hash);
    const mark = change.mark;
    if (!mark) return;
    if (mark.epoch !== view.epoch || mark.seq > view.seq + 1) {
      // A change this view never saw (a gap), or the store started another count.
      void this.rebuild();
      return;
    }
    if (mark.seq > view.seq) {
      view.seq = mark.seq;
      this.release(view.seq, true);
    }
  }

  private waitForSeq(seq: number): Promise<boolean> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((waiter) => waiter !== entry);
        // The stream did not bring what the store counted: a lost message. Read everything again.
        void this.rebuild();
        resolve(false);
      }, this.catchUpTimeoutMs);
      timer.unref();
      const entry: SeqWaiter = {
        seq,
        resolve: (reached) => {
          clearTimeout(timer);
          resolve(reached);
        },
      };
      this.waiters.push(entry);
    });
  }

  private release(seq: number, reached: boolean): void {
    if (this.waiters.length === 0) return;
    const due = this.waiters.filter((waiter) => waiter.seq <= seq);
    this.waiters = this.waiters.filter((waiter) => waiter.seq > seq);
    for (const waiter of due) waiter.resolve(reached);
  }

  /**
   * Reads every hash again: mark first, then HSCAN, so each hash counted by the mark is either in
   * the scan or came through the change stream (subscribed before this starts). Until it ends no
   * miss is decided locally. A newer rebuild (another resync) supersedes this one.
   */
  private async rebuild(): Promise<void> {
    if (this.closed) return;
    const generation = ++this.generation;
    clearTimeout(this.retryTimer);
    this.view = null;
    this.release(Number.POSITIVE_INFINITY, false);
    const startedAt = performance.now();
    // Collecting before the mark is read: a change published just after the read may arrive first.
    const build: Build = { filter: null, early: [], marks: [] };
    this.build = build;
    try {
      const mark = await this.source.issuedMark({ countHashes: true });
      if (generation !== this.generation) return;
      const capacity = Math.max(this.options.minCapacity ?? DEFAULT_MIN_CAPACITY, (mark.hashes ?? 0) * 2);
      const filter = new GrowingBloomFilter(
        capacity,
        this.options.falsePositiveRate ?? DEFAULT_FALSE_POSITIVE_RATE,
        this.seeds,
      );
      for (const hash of build.early.splice(0)) filter.add(hash);
      build.filter = filter;
      await this.source.scanIssuedHashes((hashes) => {
        if (generation === this.generation) for (const hash of hashes) filter.add(hash);
      });
      if (generation !== this.generation) return;
      this.build = null;
      const seq = followedSeq(mark, build.marks);
      if (seq === null) {
        void this.rebuild();
        return;
      }
      this.view = { filter, epoch: mark.epoch, seq };
      this.options.onRebuilt?.(filter.count, filter.bytes, performance.now() - startedAt);
    } catch {
      if (generation !== this.generation || this.closed) return;
      this.build = null;
      this.retryTimer = setTimeout(() => void this.rebuild(), this.options.retryMs ?? DEFAULT_RETRY_MS);
      this.retryTimer.unref();
    }
  }
}

/**
 * The seq a rebuilt view has applied everything up to: the mark read at its start, advanced by the
 * changes that came during the scan, in order and without a gap. Null when they show a gap or
 * another epoch (the rebuild starts again).
 */
function followedSeq(start: IssuedMark, marks: IssuedMark[]): number | null {
  let seq = start.seq;
  for (const mark of marks) {
    if (mark.epoch !== start.epoch) return null;
    if (mark.seq <= seq) continue;
    if (mark.seq > seq + 1) return null;
    seq = mark.seq;
  }
  return seq;
}
