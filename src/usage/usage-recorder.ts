/**
 * The one batched recorder of usage. What the request path reports about keys (their outcomes and
 * units, their requests per minute, their calls of deprecated operations) is added to a tally in
 * memory, one buffer per concern, and nothing else happens on the request path: no store call, no
 * I/O. One timer flushes every buffer to its concern's store every few seconds, and close flushes
 * what is left. This file is the one place that decides what a refused write becomes and counts
 * what could not be written.
 */

/** The concerns that record through it, each with its own buffer and store. */
export type UsageConcern = 'keyActivity' | 'topKeys' | 'deprecationUsage';

/**
 * Tallies kept per concern while its store refuses batches (a key-day tally is about 100 bytes: a
 * few MB at most). Beyond it the oldest parts are dropped and counted: retries are bounded by it.
 */
export const MAX_RETAINED_TALLIES = 50_000;

/** Parts of a buffer (a UTC day, a minute, a route): ordered, so the oldest go first beyond the bound. */
type Part = number | string;

/** What a concern tells the recorder about its tallies and its store. */
export interface UsageBufferSpec<P extends Part, T> {
  concern: UsageConcern;
  /** A tally with nothing counted yet. */
  empty(): T;
  /** Writes one part's tallies to the concern's store (counts add up there; never set). */
  write(part: P, tallies: ReadonlyMap<string, T>): Promise<void>;
  /**
   * True when a refused write stored nothing (SQLite: one transaction), so it can be sent again
   * without counting anything twice: it is kept, within MAX_RETAINED_TALLIES, for the next flush.
   * Otherwise (a Redis script per key, a pipeline) a refused write is dropped and counted: a count
   * may be lost, never doubled.
   */
  retriesAreSafe(): boolean;
  /** A refused tally and the one gathered since, as one (only where retries are safe). */
  merge(pending: T, refused: T): T;
  /** What a tally counted (requests, calls): what is reported when it is dropped. */
  weight(tally: T): number;
}

/** One concern's buffer: part → id (a key id) → tally. */
export class UsageBuffer<P extends Part, T> {
  private pending = new Map<P, Map<string, T>>();

  constructor(readonly spec: UsageBufferSpec<P, T>) {}

  /** The tally of `id` in `part`, made empty when new: the concern adds to it in place. */
  tally(part: P, id: string): T {
    let tallies = this.pending.get(part);
    if (!tallies) this.pending.set(part, (tallies = new Map()));
    let tally = tallies.get(id);
    if (!tally) tallies.set(id, (tally = this.spec.empty()));
    return tally;
  }

  /** What has gathered, leaving the buffer empty. */
  take(): Map<P, Map<string, T>> {
    const batch = this.pending;
    this.pending = new Map();
    return batch;
  }

  /** Adds a refused part back to what is pending, merged with what was counted since. */
  keep(part: P, refused: ReadonlyMap<string, T>): void {
    let tallies = this.pending.get(part);
    if (!tallies) this.pending.set(part, (tallies = new Map()));
    for (const [id, tally] of refused) tallies.set(id, this.spec.merge(tallies.get(id) ?? this.spec.empty(), tally));
  }

  /** Memory stays bounded during a long outage: the oldest parts go whole beyond the bound; returns what they counted. */
  dropBeyond(bound: number): number {
    let retained = 0;
    for (const tallies of this.pending.values()) retained += tallies.size;
    let dropped = 0;
    for (const part of [...this.pending.keys()].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))) {
      if (retained <= bound) break;
      const tallies = this.pending.get(part)!;
      this.pending.delete(part);
      retained -= tallies.size;
      dropped += this.weightOf(tallies);
    }
    return dropped;
  }

  weightOf(tallies: ReadonlyMap<string, T>): number {
    let weight = 0;
    for (const tally of tallies.values()) weight += this.spec.weight(tally);
    return weight;
  }
}

export interface UsageRecorderOptions {
  /** How often every buffer is written (5 s). */
  flushIntervalMs?: number;
  /** A write a store refused (logged by the caller). */
  onWriteError?: (concern: UsageConcern, err: unknown) => void;
  /** Counts given up on: a refused write that cannot be retried, or beyond what is kept for retries. */
  onDropped?: (concern: UsageConcern, weight: number) => void;
  /** Tallies kept per concern for retries (MAX_RETAINED_TALLIES). */
  maxRetained?: number;
}

/**
 * One timer, one flush, one bound on retries, one count of what was given up, for every concern.
 * Flushes run one after another, so a batch is never written twice; within a flush each concern
 * writes its parts in order, beside the other concerns.
 */
export class UsageRecorder {
  private readonly buffers: Array<UsageBuffer<Part, unknown>> = [];
  private readonly timer: NodeJS.Timeout;
  private flushing: Promise<void> = Promise.resolve();
  private readonly maxRetained: number;

  constructor(private readonly options: UsageRecorderOptions = {}) {
    this.maxRetained = options.maxRetained ?? MAX_RETAINED_TALLIES;
    this.timer = setInterval(() => void this.flush(), options.flushIntervalMs ?? 5000);
    this.timer.unref();
  }

  /** A concern's buffer, flushed with the others from now on. */
  buffer<P extends Part, T>(spec: UsageBufferSpec<P, T>): UsageBuffer<P, T> {
    const buffer = new UsageBuffer(spec);
    this.buffers.push(buffer as unknown as UsageBuffer<Part, unknown>);
    return buffer;
  }

  /** Writes what every concern has gathered; resolves when this flush, and every one before it, is done. */
  flush(): Promise<void> {
    this.flushing = this.flushing.then(() => this.flushOnce());
    return this.flushing;
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.flush();
  }

  private async flushOnce(): Promise<void> {
    await Promise.all(this.buffers.map((buffer) => this.write(buffer)));
  }

  private async write(buffer: UsageBuffer<Part, unknown>): Promise<void> {
    const { spec } = buffer;
    for (const [part, tallies] of buffer.take()) {
      try {
        await spec.write(part, tallies);
      } catch (err) {
        this.options.onWriteError?.(spec.concern, err);
        if (spec.retriesAreSafe()) buffer.keep(part, tallies);
        else this.dropped(spec.concern, buffer.weightOf(tallies));
      }
    }
    if (spec.retriesAreSafe()) this.dropped(spec.concern, buffer.dropBeyond(this.maxRetained));
  }

  private dropped(concern: UsageConcern, weight: number): void {
    if (weight > 0) this.options.onDropped?.(concern, weight);
  }
}
