import { systemClock, type Clock } from '../shared/clock';
import { AdmissionLog } from './admission-log';
import {
  consumeKeyState,
  currentDayCount,
  currentMinuteCount,
  emptyKeyState,
  oldestSlidingAdmission,
  slidingMinuteCount,
  unbanKeyState,
  type KeyState,
} from './key-state';
import type { BanSettings, ConsumeOptions, KeyDecision, KeyLimiter, KeyUsage, MinuteWindowShape, WindowLimits } from './types';
import { DAY_MS, banPolicy, dayIndex, keyDecision, keyUsage, minuteIndex, slidingMinuteResetAt, windowEnd, type BanPolicy } from './windows';

/** What another store last said about a key, to start from when this limiter takes over. */
export interface KeySnapshot {
  /** Epoch ms the counts were read at. */
  at: number;
  minuteCount: number;
  dayCount: number;
  /** Epoch ms, 0 for none. */
  bannedUntil: number;
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
    let state = this.states.get(keyId);
    if (state === undefined) {
      state = emptyKeyState();
      this.states.set(keyId, state);
    }
    const outcome = consumeKeyState(state, limits, this.ban, now, this.shape, options?.shadow === true);
    if (this.shape === 'fixed') return keyDecision(outcome, now, state.minuteCount, state.dayCount, state.bannedUntil, limits);
    const minuteResetAt = slidingMinuteResetAt(oldestSlidingAdmission(state, now), now);
    return keyDecision(outcome, now, state.minuteCount, state.dayCount, state.bannedUntil, limits, minuteResetAt);
  }

  /**
   * Starts a key from `snapshot` unless this limiter already holds it: the fallback for a Redis
   * outage begins where Redis left off instead of from zero.
   */
  seed(keyId: string, snapshot: KeySnapshot): void {
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
    this.states.set(keyId, state);
  }

  async usage(keyId: string, limits: WindowLimits): Promise<KeyUsage> {
    const now = this.clock.now();
    const state = this.states.get(keyId);
    if (state === undefined) {
      return keyUsage(now, 0, 0, 0, limits, this.shape === 'sliding' ? slidingMinuteResetAt(0, now) : undefined);
    }
    if (this.shape === 'sliding') {
      const resetAt = slidingMinuteResetAt(oldestSlidingAdmission(state, now), now);
      return keyUsage(now, slidingMinuteCount(state, now), currentDayCount(state, now), state.bannedUntil, limits, resetAt);
    }
    return keyUsage(now, currentMinuteCount(state, now), currentDayCount(state, now), state.bannedUntil, limits);
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
