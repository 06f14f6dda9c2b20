import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';
import { systemClock, type Clock } from '../../shared/clock';
import type { RedisClient } from '../../shared/redis/redis';
import {
  AddressReservations,
  DEFAULT_RESERVATION_UNITS,
  type Reservation,
  type ReservationSource,
} from './address-reservations';
import type { AddressConsumeOptions, AddressDecision, AddressLimiter, WindowState } from '../types';

const WINDOW_SECONDS = 60;

export interface AddressLimiterOptions {
  /** Requests one client address may make per 60 s (config `anonymous.perMinute`). */
  perMinute: number;
  clock?: Clock;
}

export interface RedisAddressLimiterOptions extends AddressLimiterOptions {
  namespace: string;
  /** Units reserved at once for requests with never-issued keys (address-reservations.ts). */
  reservationUnits?: number;
}

/**
 * Per-address limit for requests without a valid key, on rate-limiter-flexible: a fixed 60 s window
 * per address starting at its first request. A refusal resolves with allowed=false; a store failure
 * rejects with the store's Error, so the gateway applies its fail mode.
 */
export class FlexibleAddressLimiter implements AddressLimiter, ReservationSource {
  private readonly allow: (res: RateLimiterRes) => AddressDecision;
  private readonly refuse: (reason: unknown) => AddressDecision;
  /** Null: every request is counted on its own (in process, where counting costs nothing). */
  private readonly reservations: AddressReservations | null;

  constructor(
    private readonly limiter: RateLimiterAbstract,
    private readonly perMinute: number,
    private readonly clock: Clock = systemClock,
    reservationUnits = 0,
  ) {
    this.reservations = reservationUnits > 0 ? new AddressReservations(this, perMinute, clock, reservationUnits) : null;
    // Bound once, not per call.
    this.allow = (res) => this.decision(true, res);
    this.refuse = (reason) => {
      if (reason instanceof RateLimiterRes) return this.decision(false, reason);
      throw reason;
    };
  }

  consume(address: string, options?: AddressConsumeOptions): Promise<AddressDecision> {
    if (this.reservations) {
      if (options?.neverIssuedKey) return this.reservations.consume(address);
      const held = this.reservations.takeHeld(address);
      if (held) return Promise.resolve(held);
    }
    return this.limiter.consume(address).then(this.allow, this.refuse);
  }

  /** `units` at once from the address's window; what fits under the limit is granted. */
  async reserve(address: string, units: number): Promise<Reservation> {
    let res: RateLimiterRes;
    try {
      res = await this.limiter.consume(address, units);
    } catch (reason) {
      if (!(reason instanceof RateLimiterRes)) throw reason;
      res = reason;
    }
    // A refusal from rate-limiter-flexible's in-memory block reports nothing consumed: nothing granted.
    const granted =
      res.consumedPoints === 0 ? 0 : Math.min(units, Math.max(0, this.perMinute - res.consumedPoints + units));
    const msBeforeNext = res.msBeforeNext > 0 ? res.msBeforeNext : WINDOW_SECONDS * 1000;
    return { granted, remaining: res.remainingPoints, resetAt: this.clock.now() + msBeforeNext };
  }

  async peek(address: string): Promise<WindowState> {
    const res = await this.limiter.get(address);
    if (!res)
      return { limit: this.perMinute, remaining: this.perMinute, resetAt: this.clock.now() + WINDOW_SECONDS * 1000 };
    const window = this.decision(true, res).window;
    return { ...window, remaining: window.remaining + (this.reservations?.held(address) ?? 0) };
  }

  private decision(allowed: boolean, res: RateLimiterRes): AddressDecision {
    // msBeforeNext is -1 for a record without expiry, which these limiters never write; read it as
    // "a full window" rather than promise a reset in the past.
    const msBeforeNext = res.msBeforeNext > 0 ? res.msBeforeNext : WINDOW_SECONDS * 1000;
    return {
      allowed,
      window: { limit: this.perMinute, remaining: res.remainingPoints, resetAt: this.clock.now() + msBeforeNext },
      retryAfterMs: allowed ? 0 : msBeforeNext,
    };
  }
}

/** Addresses counted in Redis, shared by every instance: keys `${namespace}:rl:addr:${address}`. */
export function createRedisAddressLimiter(
  redis: RedisClient,
  options: RedisAddressLimiterOptions,
): FlexibleAddressLimiter {
  const limiter = new RateLimiterRedis({
    storeClient: redis,
    keyPrefix: `${options.namespace}:rl:addr`,
    points: options.perMinute,
    duration: WINDOW_SECONDS,
    // Fail at once while Redis is down instead of waiting on the command timeout.
    rejectIfRedisNotReady: true,
    // Once an address is over its limit this instance refuses it from memory until the window
    // ends: a flood from one address costs Redis one round trip per instance, not one per request.
    inMemoryBlockOnConsumed: options.perMinute + 1,
  });
  return new FlexibleAddressLimiter(
    limiter,
    options.perMinute,
    options.clock,
    options.reservationUnits ?? DEFAULT_RESERVATION_UNITS,
  );
}

/** Addresses counted in this process (one instance). Windows follow the system time. */
export function createMemoryAddressLimiter(options: AddressLimiterOptions): FlexibleAddressLimiter {
  const limiter = new RateLimiterMemory({ points: options.perMinute, duration: WINDOW_SECONDS });
  return new FlexibleAddressLimiter(limiter, options.perMinute, options.clock);
}
