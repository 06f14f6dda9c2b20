import type { Clock } from '../../shared/clock';
import type {
  ConsumeOptions,
  ConsumerShare,
  ConsumerWindows,
  KeyDecision,
  KeyLimiter,
  KeyRef,
  KeyUsage,
  RefusingWindow,
  WindowLimits,
  WindowName,
  WindowsHeld,
  WindowState,
} from '../types';
import { unitsLeft, type Lease, type LeaseReturn, type LeaseWindowView } from './lease';
import { LeaseBook } from './lease-book';
import { KeyRates } from './key-rates';
import { wantedLeaseUnits } from './lease-size';
import { BUSY_KEY_REQUESTS_PER_SECOND } from './lease-settings';
import type { LeaseStore } from './lease-store';
import type { BanNotices } from './ban-notices';
import { shiftedRemaining } from '../windows/shifted-remaining';

type Allowed = Extract<KeyDecision, { outcome: 'allowed' }>;

/** How often leases past their life are ended and their units sent back when no request carried them. */
export const LEASE_SWEEP_MS = 100;

/** Idle keys' rates are forgotten this often. */
const FORGET_IDLE_MS = 10_000;

export interface LeasingOptions {
  clock: Clock;
  /** Config `rateLimit.leases.enabled`, read at each request (reloadable): off, every request goes to the store. */
  enabled(): boolean;
  /** Config `rateLimit.leases.busyRequestsPerSecond` (reloadable); default BUSY_KEY_REQUESTS_PER_SECOND. */
  busyRequestsPerSecond?(): number;
  /** Period of the sweep that ends expired leases and sends returns no request carried; default LEASE_SWEEP_MS. */
  sweepMs?: number;
  /** A batch of returns did not reach the store (its units count as expired). */
  onReturnError?(err: unknown): void;
  /** Bans told to every instance (ban-notices.ts): a key banned anywhere loses its lease here at once. Closed with this limiter. */
  bans?: BanNotices;
}

/** Admitted requests of leaseable keys: decided from a lease (no round trip) or by the store. */
export interface LeaseAdmissions {
  lease: number;
  store: number;
}

/**
 * A KeyLimiter in front of the shared store's (docs/scaling.md "Leases"): a key busy on this
 * instance (KeyRates) is admitted from this instance's lease of units (LeaseBook) with no round
 * trip; with no usable lease the request goes to the store, which decides it and takes a lease in
 * the same one script (at most one round trip per request), with the return of the lease that just
 * ended riding along. Leases that end by expiry with no next request go back in a batch, off the
 * request path (the sweep).
 *
 * Refusals are never decided from a lease: a request a lease cannot admit goes to the store, so a
 * ban counts every refusal. Keys with maxInFlight, shadowed keys and plans stay on the per-request
 * path (as do sliding minutes and the anonymous limit: this class is not built for them).
 */
export class LeasingKeyLimiter implements KeyLimiter {
  readonly book: LeaseBook;
  readonly admissions: LeaseAdmissions = { lease: 0, store: 0 };
  private readonly rates: KeyRates;
  /**
   * Keys whose lease is being taken now, and when that round trip ends: their other requests wait
   * for it and are admitted from the new lease (no command of their own), or ask for none.
   */
  private readonly taking = new Map<string, Promise<void>>();
  /** The keys of the resets under way in this process (whileResetting). */
  private readonly resets = new Set<(holder: KeyRef) => boolean>();
  /** Keys whose last take was granted nothing (near a limit): their requests do not wait for a take. */
  private readonly ungranted = new Set<string>();
  /** Each leased key's decision at its take, windows as requests used them: what lease admissions show. */
  private readonly shown = new Map<string, Allowed>();
  private pending: LeaseReturn[] = [];
  /** The sweep runs only while leases are out or returns wait: an idle process wakes for nothing. */
  private timer: NodeJS.Timeout | undefined;
  private lastForget: number;
  private readonly stopHearingBans: () => void;

  constructor(
    private readonly store: LeaseStore,
    private readonly options: LeasingOptions,
  ) {
    this.book = new LeaseBook(options.clock);
    this.rates = new KeyRates(options.clock);
    this.lastForget = options.clock.now();
    // Its unused units go back: the ban refuses every request from now on, they would only sit idle.
    const offs = [
      options.bans?.onBan((keyId) => this.endLease(keyId, true)),
      // A ban published while the subscription was down is unknown here: every lease ends instead.
      options.bans?.onMissed(() => this.queue(this.book.endAll())),
    ];
    this.stopHearingBans = () => offs.forEach((off) => off?.());
  }

  private sweeping(): void {
    if (this.timer !== undefined) return;
    this.timer = setInterval(() => void this.sweep(), this.options.sweepMs ?? LEASE_SWEEP_MS);
    this.timer.unref();
  }

  consume(key: KeyRef, limits: WindowLimits, options?: ConsumeOptions): Promise<KeyDecision> {
    // A reset ends the key's lease and sends its return itself, before the reset runs (whileResetting).
    if (this.underReset(key)) return this.store.consume(key, limits, options).then((d) => this.counted(key, d));
    if (!this.leaseable(limits, options)) {
      if (this.book.size > 0) this.endLease(key.keyId, true);
      return this.store.consume(key, limits, options);
    }
    const cost = options?.cost ?? 1;
    this.rates.record(key.keyId);
    this.forgetIdleKeys();
    return this.decide(key, limits, options, cost, true);
  }

  /**
   * From the key's lease; else, while its lease is being taken (`mayWait`), after that round trip;
   * else by the store, asking for a lease (none while one is being taken), the ended lease's return
   * carried.
   */
  private decide(
    key: KeyRef,
    limits: WindowLimits,
    options: ConsumeOptions | undefined,
    cost: number,
    mayWait: boolean,
  ): Promise<KeyDecision> {
    const admission = this.book.admit(key, cost);
    if (admission.admitted) {
      this.admissions.lease++;
      return Promise.resolve(this.fromLease(key.keyId, admission.windows));
    }
    const ended = admission.ended;
    this.shown.delete(key.keyId);
    const taking = this.taking.get(key.keyId);
    if (taking !== undefined && mayWait && ended === null && !this.ungranted.has(key.keyId))
      return taking.then(() => this.decide(key, limits, options, cost, false));
    const wanted = taking !== undefined ? 0 : this.wanted(key.keyId, cost);
    if (wanted === 0 && ended === null)
      return this.store.consume(key, limits, options).then((decision) => this.counted(key, decision));
    return this.take(key, limits, options, wanted, ended);
  }

  private wanted(keyId: string, cost: number): number {
    const busy = this.options.busyRequestsPerSecond?.() ?? BUSY_KEY_REQUESTS_PER_SECOND;
    // Busy by the average rate of the last two seconds; sized by their busiest quarter second (recent-rate.ts).
    if (!(this.rates.perSecond(keyId) >= busy)) return 0;
    return wantedLeaseUnits(this.rates.peakPerSecond(keyId), cost, busy);
  }

  /** A decision of the store's: an admission counted, a ban this refusal set told to every instance. */
  private counted(key: KeyRef, decision: KeyDecision): KeyDecision {
    if (decision.outcome === 'allowed') this.admissions.store++;
    else if (decision.outcome === 'limited' && decision.bannedNow) this.options.bans?.publish(key.keyId);
    return decision;
  }

  /** Keys whose every request the store decides: leases off, maxInFlight, shadow. */
  private leaseable(limits: WindowLimits, options: ConsumeOptions | undefined): boolean {
    if (!this.options.enabled()) {
      if (this.book.size > 0) this.queue(this.book.endAll());
      return false;
    }
    return options?.inFlight === undefined && options?.shadow !== true && limits.shadow !== true;
  }

  /** The store's decision and lease in one round trip, the ended lease's return carried first. */
  private async take(
    key: KeyRef,
    limits: WindowLimits,
    options: ConsumeOptions | undefined,
    wanted: number,
    ended: LeaseReturn | null,
  ): Promise<KeyDecision> {
    const sentAt = this.options.clock.now();
    let taken = (): void => {};
    if (wanted > 0) this.taking.set(key.keyId, new Promise<void>((resolve) => (taken = resolve)));
    try {
      const { decision, grant, returned } = await this.store.consumeWithLease(key, limits, options, wanted, ended);
      if (ended !== null && returned === false) this.book.returnFailed(ended);
      if (wanted > 0 && (grant === null || grant.units <= 0)) this.ungranted.add(key.keyId);
      else this.ungranted.delete(key.keyId);
      if (decision.outcome !== 'allowed') return this.counted(key, decision);
      this.admissions.store++;
      if (grant === null || grant.units <= 0) return decision;
      const previous = this.book.take(key, grant, sentAt).ended;
      if (previous !== null) this.queue([previous]);
      this.sweeping();
      const shown = usedView(decision, grant.units);
      this.shown.set(key.keyId, shown);
      return shown;
    } catch (err) {
      if (ended !== null) this.book.returnFailed(ended);
      throw err;
    } finally {
      if (wanted > 0) {
        this.taking.delete(key.keyId);
        taken();
      }
    }
  }

  /** A request admitted from the key's lease: its take's decision with the lease's windows as they stand now. */
  private fromLease(keyId: string, views: readonly LeaseWindowView[]): Allowed {
    const at = this.shown.get(keyId)!;
    const lease = this.book.get(keyId);
    const remaining = (name: RefusingWindow) => views.find((v) => v.name === name)?.remaining;
    const decision: Allowed = {
      outcome: 'allowed',
      minute: withRemaining(at.minute, remaining('minute')),
      day: withRemaining(at.day, remaining('day')),
      now: lease === undefined ? at.now : at.now + (this.options.clock.now() - lease.sentAt),
      fromLease: true,
    };
    if (at.month) decision.month = withRemaining(at.month, remaining('month'));
    if (at.consumer) decision.consumer = consumerView(at.consumer, remaining);
    if (lease === undefined) this.shown.delete(keyId);
    return decision;
  }

  /** Ends a key's lease; `giveBack`: its unused units go back (batched), else they stay counted (expired). */
  private endLease(keyId: string, giveBack: boolean): void {
    this.shown.delete(keyId);
    const plan = this.book.end(keyId);
    if (plan === null) return;
    if (giveBack) this.queue([plan]);
    else this.book.returnFailed(plan);
  }

  private queue(returns: readonly LeaseReturn[]): void {
    for (const plan of returns) {
      this.shown.delete(plan.holder.keyId);
      this.pending.push(plan);
    }
    if (this.pending.length > 0) this.sweeping();
  }

  /** Keys not seen for a whole rate interval are forgotten now and then: the rates hold the keys in use. */
  private forgetIdleKeys(): void {
    const now = this.options.clock.now();
    if (now - this.lastForget < FORGET_IDLE_MS) return;
    this.lastForget = now;
    this.rates.forgetIdle();
    // A key near its limit then waits for one take again to be told so.
    this.ungranted.clear();
  }

  /** Ends the leases past their life and sends every return no request carried, in one batch. */
  async sweep(): Promise<void> {
    this.queue(this.book.endExpired());
    if (this.pending.length === 0) {
      if (this.book.size === 0) this.stopSweeping();
      return;
    }
    const batch = this.pending;
    this.pending = [];
    await this.giveBackNow(batch);
  }

  /** The key's windows in the store, with the units of this instance's lease of it not counted as used. */
  async usage(key: KeyRef, limits: WindowLimits, billingDay?: number): Promise<KeyUsage> {
    const usage = await this.store.usage(key, limits, billingDay);
    const lease = this.book.get(key.keyId);
    if (lease === undefined) return usage;
    const back = <W extends WindowState>(name: RefusingWindow, state: W) => unusedBack([lease], name, state);
    const result: KeyUsage = { ...usage, minute: back('minute', usage.minute), day: back('day', usage.day) };
    if (usage.month) result.month = back('month', usage.month);
    return result;
  }

  /** A consumer's windows in the store, with the units of this instance's leases of its keys not counted as used. */
  async consumerUsage(consumer: ConsumerShare): Promise<ConsumerWindows> {
    const windows = await this.store.consumerUsage(consumer);
    const leases = [...this.book.ofConsumer(consumer.id)];
    if (leases.length === 0) return windows;
    const result: ConsumerWindows = {};
    if (windows.minute) result.minute = unusedBack(leases, 'consumer-minute', windows.minute);
    if (windows.day) result.day = unusedBack(leases, 'consumer-day', windows.day);
    if (windows.month) result.month = unusedBack(leases, 'consumer-month', windows.month);
    return result;
  }

  addCredits(key: KeyRef, units: number, billingDay?: number): Promise<void> {
    return this.store.addCredits(key, units, billingDay);
  }

  addConsumerCredits(consumer: ConsumerShare, units: number): Promise<void> {
    return this.store.addConsumerCredits(consumer, units);
  }

  unban(key: KeyRef): Promise<void> {
    return this.store.unban(key);
  }

  /**
   * A reset window starts again from the units out in leases (the store counts them): this
   * instance's lease of the key ends first, its unused units given back and its units off the
   * store's ledger, so the reset counts only other instances' leases.
   */
  async resetWindows(key: KeyRef, windows: readonly WindowName[], billingDay?: number): Promise<WindowsHeld> {
    this.shown.delete(key.keyId);
    return this.whileResetting(
      (holder) => holder.keyId === key.keyId,
      () => this.store.resetWindows(key, windows, billingDay),
    );
  }

  async resetConsumerWindows(consumer: ConsumerShare, windows: readonly WindowName[]): Promise<WindowsHeld> {
    return this.whileResetting(
      (holder) => holder.consumerId === consumer.id,
      () => this.store.resetConsumerWindows(consumer, windows),
    );
  }

  /**
   * A reset with no lease of this process in play: from its start to its end the matching keys'
   * requests go to the store (each counts wholly before or wholly after the reset, one script each),
   * takes under way land first, and every lease they or earlier takes hold ends and goes back before
   * the reset runs. Before, a take sent while the returns were under way was counted in the windows
   * the reset restarted from, and its units on both sides of it (a CI run: 230 of 120).
   */
  private async whileResetting<T>(matches: (holder: KeyRef) => boolean, reset: () => Promise<T>): Promise<T> {
    this.resets.add(matches);
    try {
      await Promise.all(this.taking.values());
      await this.endBeforeReset(matches);
      return await reset();
    } finally {
      this.resets.delete(matches);
    }
  }

  private underReset(key: KeyRef): boolean {
    if (this.resets.size === 0) return false;
    for (const matches of this.resets) if (matches(key)) return true;
    return false;
  }

  private async endBeforeReset(matches: (holder: KeyRef) => boolean): Promise<void> {
    const plans = this.book.endBeforeReset(matches);
    for (const plan of plans) this.shown.delete(plan.holder.keyId);
    if (plans.length > 0) await this.giveBackNow(plans);
  }

  /** Sends returns at once (off the request path: a reset's); what the store did not take counts as expired. */
  private async giveBackNow(plans: readonly LeaseReturn[]): Promise<void> {
    try {
      const taken = await this.store.returnUnits(plans);
      plans.forEach((plan, i) => {
        if (!taken[i]) this.book.returnFailed(plan);
      });
    } catch (err) {
      for (const plan of plans) this.book.returnFailed(plan);
      this.options.onReturnError?.(err);
    }
  }

  /** The windows move to other names: the lease ends with nothing given back (its units move with them). */
  moveWindows(from: KeyRef, to: KeyRef): Promise<void> {
    this.endLease(from.keyId, false);
    return this.store.moveWindows(from, to);
  }

  release(key: KeyRef, leaseId: string): void {
    this.store.release(key, leaseId);
  }

  activeBans(): Promise<number> {
    return this.store.activeBans();
  }

  private stopSweeping(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Every lease ends and its units go back before the store closes. */
  async close(): Promise<void> {
    this.stopHearingBans();
    await this.options.bans?.close();
    this.queue(this.book.endAll());
    await this.sweep();
    this.stopSweeping();
    await this.store.close();
  }
}

/** `state` with the unused units of `leases` counted in that same window (its end) given back to its remaining. */
function unusedBack<W extends WindowState>(leases: readonly Lease[], name: RefusingWindow, state: W): W {
  let left = 0;
  for (const lease of leases)
    if (lease.windows.some((w) => w.name === name && w.resetAt === state.resetAt)) left += unitsLeft(lease);
  return left === 0 ? state : { ...state, remaining: state.remaining + left };
}

function withRemaining<W extends WindowState>(state: W, remaining: number | undefined): W {
  return remaining === undefined ? state : { ...state, remaining };
}

function consumerView(windows: ConsumerWindows, remaining: (name: RefusingWindow) => number | undefined) {
  const view: ConsumerWindows = {};
  if (windows.minute) view.minute = withRemaining(windows.minute, remaining('consumer-minute'));
  if (windows.day) view.day = withRemaining(windows.day, remaining('consumer-day'));
  if (windows.month) view.month = withRemaining(windows.month, remaining('consumer-month'));
  return view;
}

/**
 * The decision of the request that took a lease of `units`, its windows as requests used them (the
 * lease's units not counted; headers, usage); `leaseUnits` says how many the store counted besides.
 */
function usedView(decision: Allowed, units: number): Allowed {
  return { ...shiftedRemaining(decision, units), leaseUnits: units };
}
