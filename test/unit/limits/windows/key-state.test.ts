import {
  consumeKeyState,
  currentDayCount,
  currentMinuteCount,
  emptyKeyState,
  unbanKeyState,
} from '../../../../src/limits/windows/key-state';
import {
  DAY_MS,
  OUTCOME_ALLOWED,
  OUTCOME_BANNED,
  OUTCOME_LIMITED,
  OUTCOME_LIMITED_BANNED_NOW,
  banPolicy,
  windowEnd,
} from '../../../../src/limits/windows/windows';

const ban = banPolicy({ threshold: 2, windowSeconds: 60, durationSeconds: 900 });
const T = Date.UTC(2026, 0, 1, 12, 0, 30);

describe('consumeKeyState', () => {
  it('counts both windows of an allowed request and remembers which windows they are', () => {
    const state = emptyKeyState();
    expect(consumeKeyState(state, { limits: { perMinute: 2, perDay: 10 }, ban, now: T })).toBe(OUTCOME_ALLOWED);
    expect(state).toMatchObject({
      minuteCount: 1,
      dayCount: 1,
      minuteIndex: Math.floor(T / 60_000),
      dayIndex: Math.floor(T / DAY_MS),
    });
    expect(state.keepUntil).toBe(windowEnd(T, DAY_MS) + ban.retainMs);
  });

  it('restarts a window whose index has passed, and only that one', () => {
    const state = emptyKeyState();
    const limits = { perMinute: 2, perDay: 10 };
    consumeKeyState(state, { limits, ban, now: T });
    consumeKeyState(state, { limits, ban, now: T });
    expect(consumeKeyState(state, { limits, ban, now: T + 60_000 })).toBe(OUTCOME_ALLOWED);
    expect(state.minuteCount).toBe(1);
    expect(state.dayCount).toBe(3);
    expect(currentMinuteCount(state, T + 120_000)).toBe(0);
    expect(currentDayCount(state, T + 120_000)).toBe(3);
    expect(currentDayCount(state, T + DAY_MS)).toBe(0);
  });

  it('consumes nothing on refusal, counts the refusal, and bans past the threshold', () => {
    const state = emptyKeyState();
    const limits = { perMinute: 1, perDay: 10 };
    consumeKeyState(state, { limits, ban, now: T });
    expect(consumeKeyState(state, { limits, ban, now: T })).toBe(OUTCOME_LIMITED);
    expect(state).toMatchObject({ minuteCount: 1, dayCount: 1, refusalCount: 1, refusalsResetAt: T + 60_000 });
    expect(consumeKeyState(state, { limits, ban, now: T + 1 })).toBe(OUTCOME_LIMITED);
    expect(state.refusalsResetAt).toBe(T + 60_000);
    expect(consumeKeyState(state, { limits, ban, now: T + 2 })).toBe(OUTCOME_LIMITED_BANNED_NOW);
    expect(state).toMatchObject({
      bannedUntil: T + 2 + 900_000,
      refusalCount: 0,
      refusalsResetAt: 0,
      minuteCount: 1,
      dayCount: 1,
    });
    expect(consumeKeyState(state, { limits, ban, now: T + 3 })).toBe(OUTCOME_BANNED);
    expect(state.refusalCount).toBe(0);
  });

  it('keeps the state at least until a ban set late in the day ends', () => {
    const state = emptyKeyState();
    const late = Date.UTC(2026, 0, 1, 23, 59, 59);
    const limits = { perMinute: 1, perDay: 10 };
    for (let i = 0; i < 4; i++) consumeKeyState(state, { limits, ban, now: late });
    expect(state.bannedUntil).toBe(late + 900_000);
    expect(state.keepUntil).toBeGreaterThan(state.bannedUntil);
  });

  it('unbanKeyState clears the ban and the refusal count', () => {
    const state = { ...emptyKeyState(), bannedUntil: T + 1, refusalCount: 2, refusalsResetAt: T + 5 };
    unbanKeyState(state);
    expect(state).toMatchObject({ bannedUntil: 0, refusalCount: 0, refusalsResetAt: 0 });
  });
});
