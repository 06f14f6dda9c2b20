import type { KeySnapshot } from './memory-key-limiter';
import type {
  AddressConsumeOptions,
  AddressDecision,
  AddressLimiter,
  ConsumeOptions,
  ConsumerShare,
  ConsumerWindows,
  KeyDecision,
  KeyLimiter,
  KeyRef,
  KeyUsage,
  WindowLimits,
  WindowName,
  WindowsHeld,
  WindowState,
} from './types';
export type { FallbackKind } from './types';

/**
 * What the gateway does with a limit decision while the shared store does not answer
 * (config `store.failMode`):
 * - `local`: each instance decides on its own in-process limiter (limits per instance, not global);
 * - `open`: requests are served without limits (counted in a metric);
 * - `closed`: the store error reaches the gateway, which answers 503 `service_unavailable`.
 */
export type FailMode = 'local' | 'open' | 'closed';

export interface StoreHealthEvents {
  /** The store stopped answering; the limiters now decide on their fallback. */
  degraded(err: unknown): void;
  /** A probe got an answer again; the limiters are back on the store. */
  recovered(): void;
}

/**
 * Whether the shared store answers, as the limiters last saw it. After one failure the limiters stop
 * asking the store and a background probe asks it instead, every `probeIntervalMs`, until it answers:
 * a dead or hung Redis costs one request one command timeout, not every request, and the gateway
 * returns to Redis by itself.
 */
export class StoreHealth {
  private degradedNow = false;
  private probeTimer: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(
    private readonly probe: () => Promise<unknown>,
    private readonly probeIntervalMs: number,
    private readonly events: StoreHealthEvents,
  ) {}

  get degraded(): boolean {
    return this.degradedNow;
  }

  reportFailure(err: unknown): void {
    if (this.degradedNow || this.closed) return;
    this.degradedNow = true;
    this.events.degraded(err);
    this.scheduleProbe();
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.probeTimer);
  }

  private scheduleProbe(): void {
    this.probeTimer = setTimeout(() => void this.runProbe(), this.probeIntervalMs);
    this.probeTimer.unref();
  }

  private async runProbe(): Promise<void> {
    if (this.closed) return;
    try {
      await this.probe();
    } catch {
      if (!this.closed) this.scheduleProbe();
      return;
    }
    if (this.closed) return;
    this.degradedNow = false;
    this.events.recovered();
  }
}

export interface FallbackOptions<L> {
  mode: Exclude<FailMode, 'closed'>;
  health: StoreHealth;
  /** A fresh in-process limiter, made when an outage starts so counts of an earlier one do not linger. */
  createFallback: () => L;
  /** Each failed store call, for `gateway_store_errors_total`. */
  onStoreError: (err: unknown) => void;
}

/**
 * The store's answer, or undefined when the store is degraded or the call fails; a failure is
 * counted and starts the degraded state.
 */
async function askStore<T>(options: FallbackOptions<unknown>, call: () => Promise<T>): Promise<T | undefined> {
  if (options.health.degraded) return undefined;
  try {
    return await call();
  } catch (err) {
    options.onStoreError(err);
    options.health.reportFailure(err);
    return undefined;
  }
}

/** An in-process key limiter that can start a key from what the store last said. */
export interface SeedableKeyLimiter extends KeyLimiter {
  seed(key: KeyRef, snapshot: KeySnapshot, billingDay?: number): void;
}

/** Keys whose last store decision is remembered for the fallback; the least recent go first. */
export const MAX_REMEMBERED_KEYS = 10_000;

function snapshotOf(decision: Exclude<KeyDecision, { outcome: 'concurrency_limited' }>): KeySnapshot {
  if (decision.outcome === 'banned')
    return { at: decision.now, minuteCount: 0, dayCount: 0, bannedUntil: decision.bannedUntil };
  const snapshot: KeySnapshot = {
    at: decision.now,
    minuteCount: decision.minute.limit - decision.minute.remaining,
    dayCount: decision.day.limit - decision.day.remaining,
    bannedUntil: 0,
  };
  if (decision.month) {
    snapshot.monthCount = decision.month.limit - decision.month.remaining;
    snapshot.monthCredits = decision.month.credits;
  }
  return snapshot;
}

/**
 * The store's key limiter with a fallback for outages. In `local` mode the fallback's decisions
 * stand; in `open` mode it only counts, so the rate-limit headers still say how much this instance
 * has seen, and every request is admitted. Admin reads (usage, unban) always go to the store.
 *
 * The last store decision of each recent key is remembered, and the fallback starts each key from
 * it: a key that had used up its day, or was banned, stays refused when the store stops answering
 * (or merely answers late, as under a blocked event loop), instead of starting afresh from zero.
 */
export class FallbackKeyLimiter implements KeyLimiter {
  private fallback: SeedableKeyLimiter | null = null;
  private readonly lastKnown = new Map<string, Exclude<KeyDecision, { outcome: 'concurrency_limited' }>>();

  constructor(
    private readonly primary: KeyLimiter,
    private readonly options: FallbackOptions<SeedableKeyLimiter>,
  ) {}

  async consume(key: KeyRef, limits: WindowLimits, options?: ConsumeOptions): Promise<KeyDecision> {
    const decision = await askStore(this.options, () => this.primary.consume(key, limits, options));
    if (decision === undefined) return this.decideLocally(key, limits, options);
    // A concurrency refusal says nothing of the windows: the last word on them stays.
    if (decision.outcome !== 'concurrency_limited') this.remember(key.keyId, decision);
    return decision;
  }

  /** The lease may be in either (taken before or during an outage): both are told; an unknown id is no error. */
  release(key: KeyRef, leaseId: string): void {
    this.primary.release(key, leaseId);
    this.fallback?.release(key, leaseId);
  }

  usage(key: KeyRef, limits: WindowLimits, billingDay?: number): Promise<KeyUsage> {
    return this.primary.usage(key, limits, billingDay);
  }

  /** An admin write: it goes to the store or fails, never to this process's fallback. */
  addCredits(key: KeyRef, units: number, billingDay?: number): Promise<void> {
    return this.primary.addCredits(key, units, billingDay);
  }

  consumerUsage(consumer: ConsumerShare): Promise<ConsumerWindows> {
    return this.primary.consumerUsage(consumer);
  }

  addConsumerCredits(consumer: ConsumerShare, units: number): Promise<void> {
    return this.primary.addConsumerCredits(consumer, units);
  }

  moveWindows(from: KeyRef, to: KeyRef): Promise<void> {
    return this.primary.moveWindows(from, to);
  }

  /** An admin write, as addCredits. This process's fallback keeps its own counts: they are per instance anyway. */
  resetWindows(key: KeyRef, windows: readonly WindowName[], billingDay?: number): Promise<WindowsHeld> {
    // What this instance remembers of the key would seed an outage's fallback with the counts before the reset.
    this.lastKnown.delete(key.keyId);
    return this.primary.resetWindows(key, windows, billingDay);
  }

  resetConsumerWindows(consumer: ConsumerShare, windows: readonly WindowName[]): Promise<WindowsHeld> {
    return this.primary.resetConsumerWindows(consumer, windows);
  }

  unban(key: KeyRef): Promise<void> {
    return this.primary.unban(key);
  }

  activeBans(): Promise<number> {
    return this.primary.activeBans();
  }

  async close(): Promise<void> {
    await this.fallback?.close();
    await this.primary.close();
  }

  /** Drops the fallback's counts; called when the store answers again. */
  async reset(): Promise<void> {
    const previous = this.fallback;
    this.fallback = null;
    await previous?.close();
  }

  private remember(keyId: string, decision: Exclude<KeyDecision, { outcome: 'concurrency_limited' }>): void {
    // Re-inserted so Map order is least recently used first.
    this.lastKnown.delete(keyId);
    this.lastKnown.set(keyId, decision);
    if (this.lastKnown.size > MAX_REMEMBERED_KEYS) this.lastKnown.delete(this.lastKnown.keys().next().value!);
  }

  private async decideLocally(key: KeyRef, limits: WindowLimits, options?: ConsumeOptions): Promise<KeyDecision> {
    this.fallback ??= this.options.createFallback();
    const last = this.lastKnown.get(key.keyId);
    if (last) {
      const snapshot = snapshotOf(last);
      // Open mode applies no limits, bans included; the counts still feed the headers.
      if (this.options.mode === 'open') snapshot.bannedUntil = 0;
      this.fallback.seed(key, snapshot, options?.billingDay);
    }
    const decision = await this.fallback.consume(key, limits, options);
    if (this.options.mode === 'local') return { ...decision, fallback: 'local' };
    // Open: the fallback never bans (see createFallback in index.ts), and a refusal is served anyway.
    if (decision.outcome === 'limited' || decision.outcome === 'concurrency_limited') {
      const { minute, day, month, now } = decision;
      return month
        ? { outcome: 'allowed', minute, day, month, now, fallback: 'open' }
        : { outcome: 'allowed', minute, day, now, fallback: 'open' };
    }
    return { ...decision, fallback: 'open' };
  }
}

/** The store's per-address limiter with the same fallback rules as FallbackKeyLimiter. */
export class FallbackAddressLimiter implements AddressLimiter {
  private fallback: AddressLimiter | null = null;

  constructor(
    private readonly primary: AddressLimiter,
    private readonly options: FallbackOptions<AddressLimiter>,
  ) {}

  async consume(address: string, options?: AddressConsumeOptions): Promise<AddressDecision> {
    const shared = await askStore(this.options, () => this.primary.consume(address, options));
    if (shared !== undefined) return shared;
    this.fallback ??= this.options.createFallback();
    const decision = await this.fallback.consume(address);
    if (this.options.mode === 'local') return { ...decision, fallback: 'local' };
    return { ...decision, allowed: true, retryAfterMs: 0, fallback: 'open' };
  }

  async peek(address: string): Promise<WindowState> {
    const shared = await askStore(this.options, () => this.primary.peek(address));
    if (shared !== undefined) return shared;
    this.fallback ??= this.options.createFallback();
    return this.fallback.peek(address);
  }

  reset(): void {
    this.fallback = null;
  }
}
