import { systemClock, type Clock } from '../shared/clock';
import { AdmissionLog } from './windows/admission-log';
import {
  consumeKeyState,
  currentDayCount,
  currentMinuteCount,
  currentMonthCount,
  emptyKeyState,
  enterMonth,
  oldestSlidingAdmission,
  slidingAdmissionFreeing,
  slidingMinuteCount,
  unbanKeyState,
  type KeyState,
} from './windows/key-state';
import type {
  BanSettings,
  ConsumeOptions,
  ConsumerShare,
  ConsumerWindows,
  KeyDecision,
  KeyLimiter,
  KeyRef,
  KeyUsage,
  MinuteWindowShape,
  WindowLimits,
  WindowName,
  WindowsHeld,
} from './types';
import { resetStateWindows, windowsHeld, type ResetAt } from './window-reset';
import { admitConsumer, consumerCountsOf, consumerHasRoom, rollConsumerState } from './consumers/consumer-state';
import { consumerWindows, withConsumer } from './consumers/consumer-decision';
import { moveKeyState } from './windows/move-key-state';
import { monthSpan, type MonthSpan } from './windows/month-window';
import { MonthLedgerWriter, type MonthEntry, type MonthLedger } from './windows/month-ledger';
import {
  DAY_MS,
  OUTCOME_ALLOWED,
  banPolicy,
  type OutcomeCode,
  dayIndex,
  keyDecision,
  keyUsage,
  minuteIndex,
  slidingMinuteResetAt,
  windowEnd,
  type BanPolicy,
} from './windows/windows';
import { InFlightLeases } from './in-flight/in-flight-leases';
import { keyIdOfWindowsId } from './redis/redis-names';

/** What another store last said about a key, to start from when this limiter takes over. */
export interface KeySnapshot {
  /** Epoch ms the counts were read at. */
  at: number;
  minuteCount: number;
  dayCount: number;
  /** Epoch ms, 0 for none. */
  bannedUntil: number;
  /** The month window's units taken and credits, when the key has one. */
  monthCount?: number;
  monthCredits?: number;
}

export interface MemoryKeyLimiterOptions {
  ban: BanSettings;
  clock?: Clock;
  /** Config `rateLimit.minuteWindow`; default `fixed`. */
  minuteWindow?: MinuteWindowShape;
  /** How often states past their `keepUntil` are dropped; 0 disables the timer (call `sweep()`). */
  sweepIntervalMs?: number;
  /**
   * Where month windows and credits outlive a restart (the in-process store's SQLite), read at
   * construction; absent for the fallback of a Redis outage, whose months are Redis's.
   */
  monthLedger?: MonthLedger;
  /** How often months changed by requests are written to the ledger; 0: on close only. Default 1 s. */
  monthFlushIntervalMs?: number;
  /** A write of changed months that failed (they are written again with the next one). */
  onMonthLedgerError?(err: unknown): void;
}

const DEFAULT_MONTH_FLUSH_INTERVAL_MS = 1000;

const DEFAULT_SWEEP_INTERVAL_MS = 60_000;

/**
 * Per-key windows and bans in this process: exact for one instance, and the store used when no
 * Redis is configured. Memory holds one small record per key used today (plus, for a key refused or
 * banned late in the day, until its refusal window or ban is over); a timer drops the rest.
 */
export class MemoryKeyLimiter implements KeyLimiter {
  /** Keys' windows by key id, whatever their consumer (a KeyRef's consumerId is the Redis store's business). */
  private readonly states = new Map<string, KeyState>();
  /** Consumers' windows (consumer-state.ts), by consumer id. */
  private readonly consumerStates = new Map<string, KeyState>();
  /** Slots under each key's maxInFlight, in this process only (by key id, as `states`). */
  private readonly inFlight = new InFlightLeases();
  private readonly ban: BanPolicy;
  private readonly clock: Clock;
  private readonly shape: MinuteWindowShape;
  private sweepTimer: NodeJS.Timeout | undefined;
  private readonly months: MonthLedgerWriter | null = null;

  constructor(options: MemoryKeyLimiterOptions) {
    this.ban = banPolicy(options.ban);
    this.clock = options.clock ?? systemClock;
    this.shape = options.minuteWindow ?? 'fixed';
    if (options.monthLedger) {
      for (const entry of options.monthLedger.load(this.clock.now())) this.restoreMonth(entry);
      const current = (keyId: string) => {
        const state = this.states.get(keyId);
        return state && state.monthStart >= 0
          ? { monthStart: state.monthStart, count: state.monthCount, credits: state.monthCredits }
          : null;
      };
      this.months = new MonthLedgerWriter(
        options.monthLedger,
        current,
        options.monthFlushIntervalMs ?? DEFAULT_MONTH_FLUSH_INTERVAL_MS,
        options.onMonthLedgerError ?? (() => undefined),
      );
    }
    const interval = options.sweepIntervalMs ?? DEFAULT_SWEEP_INTERVAL_MS;
    if (interval > 0) {
      this.sweepTimer = setInterval(() => this.sweep(), interval);
      this.sweepTimer.unref();
    }
  }

  async consume(ref: KeyRef, limits: WindowLimits, options?: ConsumeOptions): Promise<KeyDecision> {
    const keyId = ref.keyId;
    const now = this.clock.now();
    const state = this.stateOf(keyId);
    const lease = options?.inFlight;
    // As in Redis: a ban first, then the slots (a refusal that consumes nothing), then the windows.
    if (lease && state.bannedUntil <= now && !this.inFlight.hasRoom(keyId, lease, now))
      return this.concurrencyLimited(keyId, state, now, limits, options);
    const decision = this.consumeWindows(keyId, state, now, limits, options);
    if (lease && decision.outcome === 'allowed') this.inFlight.hold(keyId, lease, now);
    return decision;
  }

  release(ref: KeyRef, leaseId: string): void {
    this.inFlight.release(ref.keyId, leaseId);
  }

  /** The refusal with the windows as they stand: an admission of nothing (cost 0) reads them and counts nothing. */
  private concurrencyLimited(
    keyId: string,
    state: KeyState,
    now: number,
    limits: WindowLimits,
    options?: ConsumeOptions,
  ): KeyDecision {
    const windows = this.consumeWindows(keyId, state, now, limits, { ...options, cost: 0, shadow: true });
    return windows.outcome === 'allowed' ? { ...windows, outcome: 'concurrency_limited' } : windows;
  }

  private consumeWindows(
    keyId: string,
    state: KeyState,
    now: number,
    limits: WindowLimits,
    options?: ConsumeOptions,
  ): KeyDecision {
    const cost = options?.cost ?? 1;
    const month = limits.perMonth === undefined ? null : monthSpan(now, options?.billingDay);
    if (options?.consumer !== undefined)
      return this.consumeWithConsumer(keyId, state, limits, options, options.consumer, now, cost, month);
    const outcome = consumeKeyState(state, {
      limits,
      ban: this.ban,
      now,
      shape: this.shape,
      shadow: options?.shadow === true,
      cost,
      month,
    });
    return this.decisionOf(keyId, state, outcome, limits, now, cost, month);
  }

  /**
   * The key's windows and its consumer's, all or nothing. The consumer is looked at first: without
   * room there, the key's state machine is run on limits that refuse, so the refusal counts toward
   * the key's ban exactly as one of its own windows' would.
   */
  private consumeWithConsumer(
    keyId: string,
    state: KeyState,
    limits: WindowLimits,
    options: ConsumeOptions,
    share: ConsumerShare,
    now: number,
    cost: number,
    month: MonthSpan | null,
  ): KeyDecision {
    const consumer = this.consumerStateOf(share.id);
    const consumerMonth = share.limits.perMonth === undefined ? null : monthSpan(now, share.billingDay);
    rollConsumerState(consumer, now, this.shape, consumerMonth);
    const room = state.bannedUntil > now || consumerHasRoom(consumer, share.limits, cost, consumerMonth);
    const asked = room ? limits : { ...limits, perMinute: 0 };
    const outcome = consumeKeyState(state, {
      limits: asked,
      ban: this.ban,
      now,
      shape: this.shape,
      shadow: options.shadow === true,
      cost,
      month,
    });
    if (outcome === OUTCOME_ALLOWED) admitConsumer(consumer, cost, now, this.shape, consumerMonth);
    const counts = consumerCountsOf(
      consumer,
      now,
      this.shape,
      consumerMonth,
      share.limits,
      outcome === OUTCOME_ALLOWED ? 0 : cost,
    );
    return withConsumer(
      this.decisionOf(keyId, state, outcome, limits, now, cost, month),
      consumerWindows(share, counts, now),
      cost,
    );
  }

  private decisionOf(
    keyId: string,
    state: KeyState,
    outcome: OutcomeCode,
    limits: WindowLimits,
    now: number,
    cost: number,
    month: MonthSpan | null,
  ): KeyDecision {
    const monthCount = month === null ? null : currentMonthCount(state, month);
    if (month !== null && outcome === OUTCOME_ALLOWED) this.months?.markChanged(keyId, month.end);
    const answer = {
      outcome,
      now,
      minuteCount: state.minuteCount,
      dayCount: state.dayCount,
      bannedUntil: state.bannedUntil,
      limits,
      cost,
      month: monthCount,
    };
    if (this.shape === 'fixed') return keyDecision(answer);
    // A refused cost of several units waits for as many admissions to leave the minute.
    const freeing =
      outcome === OUTCOME_ALLOWED
        ? oldestSlidingAdmission(state, now)
        : slidingAdmissionFreeing(state, now, cost, limits.perMinute);
    return keyDecision({ ...answer, minuteResetAt: slidingMinuteResetAt(freeing, now) });
  }

  async consumerUsage(share: ConsumerShare): Promise<ConsumerWindows> {
    const now = this.clock.now();
    const state = this.consumerStates.get(share.id) ?? emptyKeyState();
    const month = share.limits.perMonth === undefined ? null : monthSpan(now, share.billingDay);
    return consumerWindows(share, consumerCountsOf(state, now, this.shape, month, share.limits), now);
  }

  async addConsumerCredits(share: ConsumerShare, units: number): Promise<void> {
    const state = this.consumerStateOf(share.id);
    const span = monthSpan(this.clock.now(), share.billingDay);
    enterMonth(state, span);
    state.monthCredits += units;
  }

  /** This store keeps a key's windows under its id whatever its consumer: a key that changes consumer moves nothing. */
  async moveWindows(fromRef: KeyRef, toRef: KeyRef): Promise<void> {
    const from = this.states.get(fromRef.keyId);
    if (from === undefined || fromRef.keyId === toRef.keyId) return;
    this.states.delete(fromRef.keyId);
    const to = this.states.get(toRef.keyId);
    this.states.set(toRef.keyId, to === undefined ? from : moveKeyState(from, to));
  }

  private consumerStateOf(consumerId: string): KeyState {
    let state = this.consumerStates.get(consumerId);
    if (state === undefined) {
      state = emptyKeyState();
      this.consumerStates.set(consumerId, state);
    }
    return state;
  }

  async addCredits(ref: KeyRef, units: number, billingDay?: number): Promise<void> {
    const keyId = ref.keyId;
    const state = this.stateOf(keyId);
    const span = monthSpan(this.clock.now(), billingDay);
    enterMonth(state, span);
    // On disk first: a grant the ledger refused is not applied (the admin API answers 503).
    this.months?.saveNow({
      keyId,
      monthStart: span.start,
      monthEnd: span.end,
      count: state.monthCount,
      credits: state.monthCredits + units,
    });
    state.monthCredits += units;
  }

  /** Writes the months changed since the last write now (the writer's timer does this every monthFlushIntervalMs). */
  flushMonths(): void {
    this.months?.flush();
  }

  /**
   * A month read back from the ledger at start: the key's state holds its count and credits until
   * the month ends. A ledger written before this store kept a consumer's key under its own id names
   * it `<consumer id>}:k:{<key id>` (the Redis store's windows id then); read as the key's, the larger
   * count and credits of one month win (a key moved between consumers left a row at each place).
   */
  private restoreMonth(entry: MonthEntry): void {
    const keyId = keyIdOfWindowsId(entry.keyId);
    const state = this.stateOf(keyId);
    const known = state.monthStart === entry.monthStart;
    enterMonth(state, { start: entry.monthStart, end: entry.monthEnd });
    state.monthCount = known ? Math.max(state.monthCount, entry.count) : entry.count;
    state.monthCredits = known ? Math.max(state.monthCredits, entry.credits) : entry.credits;
  }

  private stateOf(keyId: string): KeyState {
    let state = this.states.get(keyId);
    if (state === undefined) {
      state = emptyKeyState();
      this.states.set(keyId, state);
    }
    return state;
  }

  /**
   * Starts a key from `snapshot` unless this limiter already holds it: the fallback for a Redis
   * outage begins where Redis left off instead of from zero.
   */
  seed(ref: KeyRef, snapshot: KeySnapshot, billingDay?: number): void {
    const keyId = ref.keyId;
    if (this.states.has(keyId)) return;
    const state = emptyKeyState();
    state.minuteIndex = minuteIndex(snapshot.at);
    state.minuteCount = snapshot.minuteCount;
    // A sliding minute starts as if the snapshot's admissions had all come at its instant.
    if (this.shape === 'sliding') {
      state.minuteLog = new AdmissionLog();
      state.minuteLog.fill(snapshot.minuteCount, snapshot.at);
    }
    state.dayIndex = dayIndex(snapshot.at);
    state.dayCount = snapshot.dayCount;
    state.bannedUntil = snapshot.bannedUntil;
    state.keepUntil = Math.max(windowEnd(snapshot.at, DAY_MS), snapshot.bannedUntil) + this.ban.retainMs;
    if (snapshot.monthCount !== undefined) {
      enterMonth(state, monthSpan(snapshot.at, billingDay));
      state.monthCount = snapshot.monthCount;
      state.monthCredits = snapshot.monthCredits ?? 0;
    }
    this.states.set(keyId, state);
  }

  async usage(ref: KeyRef, limits: WindowLimits, billingDay?: number): Promise<KeyUsage> {
    const now = this.clock.now();
    const state = this.states.get(ref.keyId) ?? emptyKeyState();
    const month: MonthSpan | null = limits.perMonth === undefined ? null : monthSpan(now, billingDay);
    const monthCount = month === null ? null : currentMonthCount(state, month);
    if (this.shape === 'sliding') {
      const resetAt = slidingMinuteResetAt(oldestSlidingAdmission(state, now), now);
      return keyUsage({
        now,
        minuteCount: slidingMinuteCount(state, now),
        dayCount: currentDayCount(state, now),
        bannedUntil: state.bannedUntil,
        limits,
        minuteResetAt: resetAt,
        month: monthCount,
      });
    }
    return keyUsage({
      now,
      minuteCount: currentMinuteCount(state, now),
      dayCount: currentDayCount(state, now),
      bannedUntil: state.bannedUntil,
      limits,
      month: monthCount,
    });
  }

  async resetWindows(ref: KeyRef, windows: readonly WindowName[], billingDay?: number): Promise<WindowsHeld> {
    const keyId = ref.keyId;
    const state = this.states.get(keyId);
    const now = this.clock.now();
    const at: ResetAt = {
      now,
      shape: this.shape,
      month: windows.includes('month') ? monthSpan(now, billingDay) : null,
    };
    const held = windowsHeld(state, windows, at);
    if (state === undefined) return held;
    // The month's zero on disk first, as a grant: a reset the ledger refused is not applied (503).
    if (at.month !== null && state.monthStart === at.month.start && state.monthCount > 0) {
      this.months?.saveNow({
        keyId,
        monthStart: at.month.start,
        monthEnd: at.month.end,
        count: 0,
        credits: state.monthCredits,
      });
    }
    resetStateWindows(state, windows, at);
    return held;
  }

  async resetConsumerWindows(share: ConsumerShare, windows: readonly WindowName[]): Promise<WindowsHeld> {
    const state = this.consumerStates.get(share.id);
    const now = this.clock.now();
    const at: ResetAt = {
      now,
      shape: this.shape,
      month: windows.includes('month') ? monthSpan(now, share.billingDay) : null,
    };
    const held = windowsHeld(state, windows, at);
    if (state !== undefined) resetStateWindows(state, windows, at);
    return held;
  }

  async unban(ref: KeyRef): Promise<void> {
    const state = this.states.get(ref.keyId);
    if (state !== undefined) unbanKeyState(state);
  }

  async activeBans(): Promise<number> {
    const now = this.clock.now();
    let banned = 0;
    for (const state of this.states.values()) if (state.bannedUntil > now) banned += 1;
    return banned;
  }

  async close(): Promise<void> {
    clearInterval(this.sweepTimer);
    this.sweepTimer = undefined;
    // The months changed since the last write go to disk before the states are dropped.
    this.months?.close();
    this.states.clear();
    this.consumerStates.clear();
  }

  /** Drops every state nothing depends on any more; returns how many were dropped. */
  sweep(): number {
    const now = this.clock.now();
    let dropped = 0;
    for (const states of [this.states, this.consumerStates]) {
      for (const [id, state] of states) {
        if (state.keepUntil <= now) {
          states.delete(id);
          dropped += 1;
        }
      }
    }
    return dropped;
  }

  /** Number of keys with a state held; for tests and diagnostics. */
  get size(): number {
    return this.states.size;
  }
}
