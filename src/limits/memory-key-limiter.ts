import { systemClock, type Clock } from '../shared/clock';
import { AdmissionLog } from './admission-log';
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
} from './key-state';
import type { BanSettings, ConsumeOptions, KeyDecision, KeyLimiter, KeyUsage, MinuteWindowShape, WindowLimits } from './types';
import { monthSpan, type MonthSpan } from './month-window';
import { DAY_MS, OUTCOME_ALLOWED, banPolicy, dayIndex, keyDecision, keyUsage, minuteIndex, slidingMinuteResetAt, windowEnd, type BanPolicy } from './windows';

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
}

const DEFAULT_SWEEP_INTERVAL_MS = 60_000;

/**
 * Per-key windows and bans in this process: exact for one instance, and the store used when no
 * Redis is configured. Memory holds one small record per key used today (plus, for a key refused or
 * banned late in the day, until its refusal window or ban is over); a timer drops the rest.
 */
export class MemoryKeyLimiter implements KeyLimiter {
  private readonly states = new Map<string, KeyState>();
  private readonly ban: BanPolicy;
  private readonly clock: Clock;
  private readonly shape: MinuteWindowShape;
  private sweepTimer: NodeJS.Timeout | undefined;

  constructor(options: MemoryKeyLimiterOptions) {
    this.ban = banPolicy(options.ban);
    this.clock = options.clock ?? systemClock;
    this.shape = options.minuteWindow ?? 'fixed';
    const interval = options.sweepIntervalMs ?? DEFAULT_SWEEP_INTERVAL_MS;
    if (interval > 0) {
      this.sweepTimer = setInterval(() => this.sweep(), interval);
      this.sweepTimer.unref();
    }
  }

  async consume(keyId: string, limits: WindowLimits, options?: ConsumeOptions): Promise<KeyDecision> {
    const now = this.clock.now();
    const state = this.stateOf(keyId);
    const cost = options?.cost ?? 1;
    const month = limits.perMonth === undefined ? null : monthSpan(now, options?.billingDay);
    const outcome = consumeKeyState(state, limits, this.ban, now, this.shape, options?.shadow === true, cost, month);
    const monthCount = month === null ? null : currentMonthCount(state, month);
    if (this.shape === 'fixed') return keyDecision(outcome, now, state.minuteCount, state.dayCount, state.bannedUntil, limits, undefined, cost, monthCount);
    // A refused cost of several units waits for as many admissions to leave the minute.
    const freeing = outcome === OUTCOME_ALLOWED ? oldestSlidingAdmission(state, now) : slidingAdmissionFreeing(state, now, cost, limits.perMinute);
    const minuteResetAt = slidingMinuteResetAt(freeing, now);
    return keyDecision(outcome, now, state.minuteCount, state.dayCount, state.bannedUntil, limits, minuteResetAt, cost, monthCount);
  }

  async addCredits(keyId: string, units: number, billingDay?: number): Promise<void> {
    const state = this.stateOf(keyId);
    enterMonth(state, monthSpan(this.clock.now(), billingDay));
    state.monthCredits += units;
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
  seed(keyId: string, snapshot: KeySnapshot, billingDay?: number): void {
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

  async usage(keyId: string, limits: WindowLimits, billingDay?: number): Promise<KeyUsage> {
    const now = this.clock.now();
    const state = this.states.get(keyId) ?? emptyKeyState();
    const month: MonthSpan | null = limits.perMonth === undefined ? null : monthSpan(now, billingDay);
    const monthCount = month === null ? null : currentMonthCount(state, month);
    if (this.shape === 'sliding') {
      const resetAt = slidingMinuteResetAt(oldestSlidingAdmission(state, now), now);
      return keyUsage(now, slidingMinuteCount(state, now), currentDayCount(state, now), state.bannedUntil, limits, resetAt, monthCount);
    }
    return keyUsage(now, currentMinuteCount(state, now), currentDayCount(state, now), state.bannedUntil, limits, undefined, monthCount);
  }

  async unban(keyId: string): Promise<void> {
    const state = this.states.get(keyId);
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
    this.states.clear();
  }

  /** Drops every state nothing depends on any more; returns how many were dropped. */
  sweep(): number {
    const now = this.clock.now();
    let dropped = 0;
    for (const [keyId, state] of this.states) {
      if (state.keepUntil <= now) {
        this.states.delete(keyId);
        dropped += 1;
      }
    }
    return dropped;
  }

  /** Number of keys with a state held; for tests and diagnostics. */
  get size(): number {
    return this.states.size;
  }
}
