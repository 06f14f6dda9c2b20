import type { AddressDecision, AddressLimiter, KeyDecision, KeyLimiter, KeyUsage, WindowLimits } from './types';
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
 * The store's key limiter with a fallback for outages. In `local` mode the fallback's decisions
 * stand; in `open` mode it only counts, so the rate-limit headers still say how much this instance
 * has seen, and every request is admitted. Admin reads (usage, unban) always go to the store.
 */
export class FallbackKeyLimiter implements KeyLimiter {
  private fallback: KeyLimiter | null = null;

  constructor(
    private readonly primary: KeyLimiter,
    private readonly options: FallbackOptions<KeyLimiter>,
  ) {}

  async consume(keyId: string, limits: WindowLimits): Promise<KeyDecision> {
    if (!this.options.health.degraded) {
      try {
        return await this.primary.consume(keyId, limits);
      } catch (err) {
        this.options.onStoreError(err);
        this.options.health.reportFailure(err);
      }
    }
    return this.decideLocally(keyId, limits);
  }

  usage(keyId: string, limits: WindowLimits): Promise<KeyUsage> {
    return this.primary.usage(keyId, limits);
  }

  unban(keyId: string): Promise<void> {
    return this.primary.unban(keyId);
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

  private async decideLocally(keyId: string, limits: WindowLimits): Promise<KeyDecision> {
    this.fallback ??= this.options.createFallback();
    const decision = await this.fallback.consume(keyId, limits);
    if (this.options.mode === 'local') return { ...decision, fallback: 'local' };
    // Open: the fallback never bans (see createFallback in index.ts), and a refusal is served anyway.
    if (decision.outcome === 'limited') {
      return { outcome: 'allowed', minute: decision.minute, day: decision.day, now: decision.now, fallback: 'open' };
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

  async consume(address: string): Promise<AddressDecision> {
    if (!this.options.health.degraded) {
      try {
        return await this.primary.consume(address);
      } catch (err) {
        this.options.onStoreError(err);
        this.options.health.reportFailure(err);
      }
    }
    this.fallback ??= this.options.createFallback();
    const decision = await this.fallback.consume(address);
    if (this.options.mode === 'local') return { ...decision, fallback: 'local' };
    return { ...decision, allowed: true, retryAfterMs: 0, fallback: 'open' };
  }

  reset(): void {
    this.fallback = null;
  }
}
