import type { Clock } from '../../shared/clock';
import type { RedisClient } from '../../shared/redis/redis';
import { defineLuaScript, type LuaCaller } from '../../shared/redis/lua-script';
import type {
  BanSettings,
  ConsumeOptions,
  ConsumerShare,
  ConsumerWindows,
  InFlightLease,
  KeyDecision,
  KeyLimiter,
  KeyRef,
  KeyUsage,
  MinuteWindowShape,
  WindowLimits,
  WindowName,
  WindowsHeld,
} from '../types';
import { RedisConsumerWindows } from '../consumers/redis-consumer-windows';
import { refusalLua } from './redis-refusal';
import { RedisNames, type ConsumerRedisNames, type KeyRedisNames } from './redis-names';
export {
  activeBansRedisKey,
  keyLimiterRedisKey,
  leasesRedisKey,
  monthRedisKey,
  slidingLogRedisKey,
} from './redis-names';
import {
  IN_FLIGHT_HOLD_LUA,
  MAX_CARRIED_RELEASES,
  OUTCOME_CONCURRENCY_LIMITED,
  RELEASE_FLUSH_MS,
  inFlightArgv,
  inFlightCheckLua,
  inFlightReleaseLua,
  isNearLimit,
  sendReleases,
} from '../in-flight/redis-in-flight';
import { LeasesNearLimit } from '../in-flight/leases-near-limit';
import { PendingReleases } from '../in-flight/pending-releases';
import { DEFAULT_BILLING_DAY } from '../../shared/constants';
import { MonthBoundaries, type MonthCount } from '../windows/month-window';
import {
  EXPIRY_SLACK_MS,
  OUTCOME_ALLOWED,
  banPolicy,
  keyDecision,
  keyUsage,
  type OutcomeCode,
} from '../windows/windows';

/**
 * Redis layout: one hash per API key, `${namespace}:rl:{${keyId}}`. The braces make the key id the
 * Cluster hash tag, so everything one consume touches lives in one slot (it is one key) and the
 * script runs on a Cluster as on a single Redis. Fields (times in epoch ms, absent = none):
 *
 *   mw, mc   minute index (floor(now / 60000)) and its count
 *   dw, dc   day index (floor(now / 86400000)) and its count
 *   bu       banned until
 *   rc, re   refusals counted toward a ban, and the end of their window
 *
 * Windows roll over by index, not by key expiry, so a script that takes `now` from an injected clock
 * (tests) behaves exactly like one that reads Redis TIME. The hash expires (PEXPIRE, relative to
 * `now`) at the end of its day plus `retainMs`, which covers any refusal window or ban started that
 * day: memory holds one small hash per key used today.
 *
 * A key with a month window has a second hash beside it, `${namespace}:rl:{${keyId}}:mo` (same hash
 * tag, same slot): w the start of the billing month (epoch ms), c its count, k its credits. It
 * expires at the month's end (plus a second's slack), so credits end with their month and the
 * month's count outlives the day hash without keeping the rest of the key's state that long.
 */
/** Lua that sets `now` (epoch ms) from ARGV[index] when a test clock passed one ('' or absent: Redis TIME). */
function nowFromArgOrTime(index: number): string {
  return `if ARGV[${index}] and ARGV[${index}] ~= '' then
  now = tonumber(ARGV[${index}])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end`;
}

/**
 * Reads the month window when ARGV[perMonthAt] is present: picks the billing month holding `now`
 * among the four boundaries that follow it (month before's start, this month's start and end, next
 * month's end; the caller's clock may be a little off Redis TIME), and sets `ms`, `me` (its start and
 * end), `oc`, `ok` (count and credits; 0 when the hash holds another month) and `monthLimit`
 * (perMonth + credits; nil without a month window). Expects `mkey` and `now` in scope.
 */
function monthReadLua(perMonthAt: number): string {
  return `local monthLimit = nil
local ms, me, oc, ok = 0, 0, 0, 0
if ARGV[${perMonthAt}] and ARGV[${perMonthAt}] ~= '' then
  ms = tonumber(ARGV[${perMonthAt + 2}])
  me = tonumber(ARGV[${perMonthAt + 3}])
  if now < ms then
    me = ms
    ms = tonumber(ARGV[${perMonthAt + 1}])
  elseif now >= me then
    ms = me
    me = tonumber(ARGV[${perMonthAt + 4}])
  end
  local g = redis.call('HMGET', mkey, 'w', 'c', 'k')
  if tonumber(g[1]) == ms then
    oc = tonumber(g[2]) or 0
    ok = tonumber(g[3]) or 0
  end
  monthLimit = tonumber(ARGV[${perMonthAt}]) + ok
end`;
}

/** Admitted: takes `cost` units of the month (when there is one) and, entering a new month, sets its expiry. */
const MONTH_ADMIT_LUA = `if monthLimit then
  if oc == 0 and ok == 0 then
    redis.call('HSET', mkey, 'w', ms, 'c', cost, 'k', 0)
    redis.call('PEXPIRE', mkey, me - now + ${EXPIRY_SLACK_MS})
  else
    redis.call('HINCRBY', mkey, 'c', cost)
  end
  oc = oc + cost
end`;

/** ARGV index of the first lease release a consume carries: after the month's five (padded when none). */
const RELEASES_AT = 18;
const NO_MONTH_ARGV = ['', '', '', '', ''];

/**
 * Fixed minute. KEYS: 1 the key's hash, 2 its month hash, 3 its in-flight leases.
 * ARGV: 1 perMinute, 2 perDay, 3 ban threshold, 4 ban window ms, 5 ban duration ms, 6 retain ms,
 * 7 shadow ('1' or '0'), 8 now (epoch ms; '': Redis TIME, so every gateway instance decides on
 * one clock), 9 cost (units of every window), 10..12 the in-flight lease (redis-in-flight.ts),
 * and with a month window 13 perMonth, 14..17 the month boundaries (see monthReadLua; five '' when
 * releases follow without a month), from 18 on the lease releases this consume carries.
 * Reply: {outcome, now, minuteCount, dayCount, bannedUntil, minuteResetAt (0: the UTC minute's end),
 * monthCount, monthCredits, monthEnd, monthStart}, an admission adding the leases the key's set holds
 * with its own (IN_FLIGHT_HOLD_LUA); outcomes as in windows.ts. Mirrors consumeKeyState in key-state.ts.
 */
const CONSUME_LUA = `
local key = KEYS[1]
local mkey = KEYS[2]
local ifkey = KEYS[3]
${inFlightReleaseLua(RELEASES_AT)}
local now
${nowFromArgOrTime(8)}
local cost = tonumber(ARGV[9])
local f = redis.call('HMGET', key, 'mw', 'mc', 'dw', 'dc', 'bu', 'rc', 're')
local bannedUntil = tonumber(f[5]) or 0
if bannedUntil > now then
  return {2, now, 0, 0, bannedUntil, 0, 0, 0, 0, 0}
end

local minute = math.floor(now / 60000)
local day = math.floor(now / 86400000)
local mc = 0
if tonumber(f[1]) == minute then mc = tonumber(f[2]) or 0 end
local dc = 0
local sameDay = tonumber(f[3]) == day
if sameDay then dc = tonumber(f[4]) or 0 end
local ttl = (day + 1) * 86400000 - now + tonumber(ARGV[6])
local minuteResetAt = 0
${monthReadLua(13)}
${inFlightCheckLua()}

if mc + cost <= tonumber(ARGV[1]) and dc + cost <= tonumber(ARGV[2]) and (not monthLimit or oc + cost <= monthLimit) then
  mc = mc + cost
  dc = dc + cost
  redis.call('HSET', key, 'mw', minute, 'mc', mc, 'dw', day, 'dc', dc)
  if not sameDay then redis.call('PEXPIRE', key, ttl) end
  ${MONTH_ADMIT_LUA}
  ${IN_FLIGHT_HOLD_LUA}
  return {0, now, mc, dc, 0, 0, oc, ok, me, ms, held}
end
${refusalLua(6)}
`;

/**
 * Sliding minute: an exact log of the admission times of the last 60 s in a sorted set beside the
 * hash (KEYS: 1 the hash, 2 the log, 3 the month hash, 4 the in-flight leases; one hash tag, one slot). A request is
 * admitted when at most perMinute - cost admissions lie in (now - 60 s, now], so no 60-second
 * interval ever admits more than the limit. Members are `now-dayCount`, unique because the day
 * count grows with every admitted unit. The log expires a minute after its last admission. ARGV and
 * reply as CONSUME_LUA; minuteResetAt is the admission whose leaving frees enough units (the oldest
 * for one) plus a minute (now + a minute when there is none).
 */
const SLIDING_CONSUME_LUA = `
local key = KEYS[1]
local log = KEYS[2]
local mkey = KEYS[3]
local ifkey = KEYS[4]
${inFlightReleaseLua(RELEASES_AT)}
local now
${nowFromArgOrTime(8)}
local cost = tonumber(ARGV[9])
local f = redis.call('HMGET', key, 'dw', 'dc', 'bu', 'rc', 're')
local bannedUntil = tonumber(f[3]) or 0
if bannedUntil > now then
  return {2, now, 0, 0, bannedUntil, 0, 0, 0, 0, 0}
end

redis.call('ZREMRANGEBYSCORE', log, '-inf', now - 60000)
local mc = redis.call('ZCARD', log)
local day = math.floor(now / 86400000)
local dc = 0
local sameDay = tonumber(f[1]) == day
if sameDay then dc = tonumber(f[2]) or 0 end
local ttl = (day + 1) * 86400000 - now + tonumber(ARGV[6])
local minuteResetAt = now + 60000
if mc > 0 then
  minuteResetAt = tonumber(redis.call('ZRANGE', log, 0, 0, 'WITHSCORES')[2]) + 60000
end
${monthReadLua(13)}
${inFlightCheckLua()}

if mc + cost <= tonumber(ARGV[1]) and dc + cost <= tonumber(ARGV[2]) and (not monthLimit or oc + cost <= monthLimit) then
  for i = 1, cost do
    redis.call('ZADD', log, now, now .. '-' .. (dc + i))
  end
  mc = mc + cost
  dc = dc + cost
  redis.call('PEXPIRE', log, 61000)
  redis.call('HSET', key, 'dw', day, 'dc', dc)
  if not sameDay then redis.call('PEXPIRE', key, ttl) end
  ${MONTH_ADMIT_LUA}
  ${IN_FLIGHT_HOLD_LUA}
  return {0, now, mc, dc, 0, minuteResetAt, oc, ok, me, ms, held}
end
if cost > 1 and mc > 0 then
  local nth = math.max(1, mc + cost - tonumber(ARGV[1]))
  local at = redis.call('ZRANGE', log, nth - 1, nth - 1, 'WITHSCORES')[2]
  if at then minuteResetAt = tonumber(at) + 60000 end
end
${refusalLua(4)}
`;

/**
 * Fixed minute. KEYS: 1 the hash, 2 the month hash. ARGV: 1 now ('' as above), and with a month
 * window 2 perMonth, 3..6 the month boundaries. Reply: {now, minuteCount, dayCount, bannedUntil, 0,
 * monthCount, monthCredits, monthStart, monthEnd}.
 */
const USAGE_LUA = `
local mkey = KEYS[2]
local now
${nowFromArgOrTime(1)}
local f = redis.call('HMGET', KEYS[1], 'mw', 'mc', 'dw', 'dc', 'bu')
local mc = 0
if tonumber(f[1]) == math.floor(now / 60000) then mc = tonumber(f[2]) or 0 end
local dc = 0
if tonumber(f[3]) == math.floor(now / 86400000) then dc = tonumber(f[4]) or 0 end
${monthReadLua(2)}
return {now, mc, dc, tonumber(f[5]) or 0, 0, oc, ok, ms, me}
`;

/**
 * Sliding minute, read only (the log is not pruned). KEYS as SLIDING_CONSUME_LUA, ARGV and reply as
 * USAGE_LUA (minuteResetAt in the fifth place).
 */
const SLIDING_USAGE_LUA = `
local mkey = KEYS[3]
local now
${nowFromArgOrTime(1)}
local f = redis.call('HMGET', KEYS[1], 'dw', 'dc', 'bu')
local dc = 0
if tonumber(f[1]) == math.floor(now / 86400000) then dc = tonumber(f[2]) or 0 end
local from = '(' .. (now - 60000)
local mc = redis.call('ZCOUNT', KEYS[2], from, '+inf')
local minuteResetAt = now + 60000
if mc > 0 then
  minuteResetAt = tonumber(redis.call('ZRANGEBYSCORE', KEYS[2], from, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)[2]) + 60000
end
${monthReadLua(2)}
return {now, mc, dc, tonumber(f[3]) or 0, minuteResetAt, oc, ok, ms, me}
`;

/**
 * Credits: KEYS 1 the month hash. ARGV 1 now ('' as above), 2 units, 3 a placeholder for perMonth
 * (any number), 4..7 the month boundaries. Adds the units to the month holding now, starting the
 * month afresh when the hash holds an earlier one.
 */
const CREDITS_LUA = `
local mkey = KEYS[1]
local now
${nowFromArgOrTime(1)}
${monthReadLua(3)}
if oc == 0 and ok == 0 then
  redis.call('HSET', mkey, 'w', ms, 'c', 0, 'k', tonumber(ARGV[2]))
  redis.call('PEXPIRE', mkey, me - now + ${EXPIRY_SLACK_MS})
else
  redis.call('HINCRBY', mkey, 'k', tonumber(ARGV[2]))
end
return ok + tonumber(ARGV[2])
`;

/**
 * A window reset (window-reset.ts; POST /admin/…/windows/reset), for a key's windows or a consumer's
 * (the same layout). KEYS: 1 the hash, 2 the sliding log, 3 the month hash. ARGV: 1 now ('' as
 * above), 2 the minute ('1' to reset), 3 its shape ('1' sliding), 4 the day ('1'), and to reset the
 * month 5 a placeholder for perMonth (any number) and 6..9 its boundaries. One script, so Redis runs
 * it between two consumes: a request counts before it (and is forgotten) or after it. The month's
 * count goes to zero, its credits stay. Reply: the units the minute, day and month held (-1: not reset).
 */
const RESET_WINDOWS_LUA = `
local key = KEYS[1]
local mkey = KEYS[3]
local now
${nowFromArgOrTime(1)}
local held = {-1, -1, -1}
if ARGV[2] == '1' then
  if ARGV[3] == '1' then
    held[1] = redis.call('ZCOUNT', KEYS[2], '(' .. (now - 60000), '+inf')
    redis.call('DEL', KEYS[2])
  else
    local f = redis.call('HMGET', key, 'mw', 'mc')
    held[1] = 0
    if tonumber(f[1]) == math.floor(now / 60000) then held[1] = tonumber(f[2]) or 0 end
    redis.call('HDEL', key, 'mw', 'mc')
  end
end
if ARGV[4] == '1' then
  local f = redis.call('HMGET', key, 'dw', 'dc')
  held[2] = 0
  if tonumber(f[1]) == math.floor(now / 86400000) then held[2] = tonumber(f[2]) or 0 end
  redis.call('HDEL', key, 'dw', 'dc')
  if ARGV[3] == '1' and ARGV[2] ~= '1' then
    -- The sliding log names an admission <time>-<day count>: with the day counting from zero again, one
    -- admitted in this same instant would take the name of one before the reset (and count once for two).
    local same = redis.call('ZRANGEBYSCORE', KEYS[2], now, '+inf', 'WITHSCORES')
    for i = 1, #same, 2 do
      redis.call('ZREM', KEYS[2], same[i])
      redis.call('ZADD', KEYS[2], same[i + 1], 'r' .. same[i])
    end
  end
end
${monthReadLua(5)}
if monthLimit then
  held[3] = oc
  if oc > 0 then redis.call('HSET', mkey, 'c', 0) end
end
return held
`;

// Names of the custom commands on the client; prefixed so they cannot clash with anyone else's.
// `held` only on an admission (IN_FLIGHT_HOLD_LUA).
type ConsumeReply = [
  OutcomeCode | typeof OUTCOME_CONCURRENCY_LIMITED,
  number,
  number,
  number,
  number,
  number,
  number,
  number,
  number,
  number,
  held?: number,
];
type UsageReply = [number, number, number, number, number, number, number, number, number];

// KEYS: the key's hash, (sliding only) its minute log, its month hash.
const CONSUME = defineLuaScript<ConsumeReply>('asgKeyLimitConsume', CONSUME_LUA, 3);
const USAGE = defineLuaScript<UsageReply>('asgKeyLimitUsage', USAGE_LUA, 2);
const SLIDING_CONSUME = defineLuaScript<ConsumeReply>('asgKeyLimitSlidingConsume', SLIDING_CONSUME_LUA, 4);
const SLIDING_USAGE = defineLuaScript<UsageReply>('asgKeyLimitSlidingUsage', SLIDING_USAGE_LUA, 3);
const CREDITS = defineLuaScript<number>('asgKeyLimitCredits', CREDITS_LUA, 1);
const RESET_WINDOWS = defineLuaScript<[number, number, number]>('asgKeyLimitResetWindows', RESET_WINDOWS_LUA, 3);

interface KeyLimitScripts {
  consume: LuaCaller<ConsumeReply>;
  usage: LuaCaller<UsageReply>;
  slidingConsume: LuaCaller<ConsumeReply>;
  slidingUsage: LuaCaller<UsageReply>;
  credits: LuaCaller<number>;
  resetWindows: LuaCaller<[number, number, number]>;
}

function monthCountOf(count: number, credits: number, resetAt: number, startAt: number): MonthCount {
  return { count, credits, resetAt, startAt };
}

export interface RedisKeyLimiterOptions {
  /** Prefix of every key, e.g. `asg:prod`; staging and production can share one Redis. */
  namespace: string;
  ban: BanSettings;
  /** Config `rateLimit.minuteWindow`; default `fixed`. */
  minuteWindow?: MinuteWindowShape;
  /**
   * Takes `now` from this clock instead of Redis TIME. For tests: in production every instance
   * must decide on Redis's clock, so leave it unset.
   */
  clock?: Clock;
  /** The batch period of lease releases no consume carried (each sent within two); default RELEASE_FLUSH_MS. */
  releaseFlushMs?: number;
}

/**
 * Per-key windows and bans in Redis, shared by every gateway instance. Each consume is one script
 * call (EVALSHA, EVAL the first time on a connection): ban check, both windows, refusal counting
 * and the ban, atomically, so N instances never admit more than the limit. The client is the
 * caller's: close() leaves it open.
 */
export class RedisKeyLimiter implements KeyLimiter {
  private readonly scripts: KeyLimitScripts;
  private readonly names: RedisNames;
  private readonly clock: Clock | undefined;
  private readonly sliding: boolean;
  // The ban part of ARGV never changes; converted to strings once.
  private readonly threshold: string;
  private readonly banWindowMs: string;
  private readonly banDurationMs: string;
  private readonly retainMs: string;
  private readonly months = new MonthBoundaries();
  /** Decisions of a key of a consumer with limits, and the consumer's own windows (redis-consumer-windows.ts). */
  private readonly consumers: RedisConsumerWindows;
  /** Lease releases on their way to Redis, carried by the key's next consume or sent in a batch. */
  private readonly releases: PendingReleases;
  /** Leases taken near their key's maxInFlight: released at once, not carried or batched. */
  private readonly nearLimit = new LeasesNearLimit();

  constructor(
    private readonly redis: RedisClient,
    options: RedisKeyLimiterOptions,
  ) {
    const ban = banPolicy(options.ban);
    this.threshold = String(ban.threshold);
    this.banWindowMs = String(ban.windowMs);
    this.banDurationMs = String(ban.durationMs);
    this.retainMs = String(ban.retainMs);
    this.names = new RedisNames(options.namespace);
    this.clock = options.clock;
    this.sliding = options.minuteWindow === 'sliding';
    this.scripts = {
      consume: CONSUME.on(redis),
      usage: USAGE.on(redis),
      slidingConsume: SLIDING_CONSUME.on(redis),
      slidingUsage: SLIDING_USAGE.on(redis),
      credits: CREDITS.on(redis),
      resetWindows: RESET_WINDOWS.on(redis),
    };
    this.consumers = new RedisConsumerWindows(redis, {
      names: this.names,
      sliding: this.sliding,
      clock: this.clock,
      months: this.months,
    });
    this.releases = new PendingReleases(
      (batch) => sendReleases(redis, batch),
      options.releaseFlushMs ?? RELEASE_FLUSH_MS,
      MAX_CARRIED_RELEASES,
    );
  }

  async consume(ref: KeyRef, limits: WindowLimits, options?: ConsumeOptions): Promise<KeyDecision> {
    const key = this.names.key(ref);
    const releases = this.releases.take(key.leases);
    if (releases === undefined) return this.decide(key, limits, options, undefined);
    try {
      return await this.decide(key, limits, options, releases);
    } catch (err) {
      this.releases.putBack(key.leases, releases);
      throw err;
    }
  }

  /** One consume script: the key's windows, ban and lease (with its consumer's windows when it has one), the carried releases first. */
  private async decide(
    key: KeyRedisNames,
    limits: WindowLimits,
    options: ConsumeOptions | undefined,
    releases: string[] | undefined,
  ): Promise<KeyDecision> {
    const cost = options?.cost ?? 1;
    const argv = [
      String(limits.perMinute),
      String(limits.perDay),
      this.threshold,
      this.banWindowMs,
      this.banDurationMs,
      this.retainMs,
      options?.shadow === true ? '1' : '0',
      this.clock === undefined ? '' : String(this.clock.now()),
      cost === 1 ? '1' : String(cost),
      ...inFlightArgv(options?.inFlight),
    ];
    if (options?.consumer !== undefined) {
      const [decision, bannedUntil, held] = await this.consumers.consume(
        key,
        argv,
        limits,
        options.consumer,
        options.billingDay,
        cost,
        releases,
      );
      if (decision.outcome === 'limited' && decision.bannedNow) this.rememberBan(key, bannedUntil);
      this.noteLease(options.inFlight, decision, held);
      return decision;
    }
    if (limits.perMonth !== undefined) argv.push(String(limits.perMonth), ...this.monthArgv(options?.billingDay));
    if (releases !== undefined) {
      if (limits.perMonth === undefined) argv.push(...NO_MONTH_ARGV);
      argv.push(...releases);
    }
    const reply = this.sliding
      ? await this.scripts.slidingConsume([key.hash, key.log, key.month, key.leases], argv)
      : await this.scripts.consume([key.hash, key.month, key.leases], argv);
    const month = limits.perMonth === undefined ? null : monthCountOf(reply[6], reply[7], reply[8], reply[9]);
    const refusedForConcurrency = reply[0] === OUTCOME_CONCURRENCY_LIMITED;
    const decision = keyDecision({
      // The windows as they stand, read as an admission of nothing.
      outcome: refusedForConcurrency ? OUTCOME_ALLOWED : (reply[0] as OutcomeCode),
      now: reply[1],
      minuteCount: reply[2],
      dayCount: reply[3],
      bannedUntil: reply[4],
      limits,
      minuteResetAt: reply[5] || undefined,
      cost,
      month,
    });
    if (refusedForConcurrency && decision.outcome === 'allowed') return { ...decision, outcome: 'concurrency_limited' };
    if (decision.outcome === 'limited' && decision.bannedNow) this.rememberBan(key, reply[4]);
    this.noteLease(options?.inFlight, decision, reply[10]);
    return decision;
  }

  /** An admitted lease taken when its set held half of maxInFlight or more is released at once (isNearLimit). */
  private noteLease(lease: InFlightLease | undefined, decision: KeyDecision, held: number | undefined): void {
    if (
      lease !== undefined &&
      decision.outcome === 'allowed' &&
      held !== undefined &&
      held > 0 &&
      isNearLimit(held, lease.max)
    ) {
      this.nearLimit.add(lease.id, lease.ttlMs);
    }
  }

  release(ref: KeyRef, leaseId: string): void {
    const leasesKey = this.names.leases(ref);
    if (this.nearLimit.take(leaseId)) {
      this.releaseNow(leasesKey, leaseId);
      return;
    }
    // No round trip on a request's path: the key's next consume carries it, or the batch sends it
    // within 2 × RELEASE_FLUSH_MS; a release lost to a Redis outage is a lease that expires (its ttl).
    this.releases.add(leasesKey, leaseId);
  }

  /**
   * A ZREM of its own, not waited for (it is on no request's path): another instance must see the
   * slot free as soon as the answer ends. It takes the key's pending releases along; if it fails,
   * those go back (ZREM is idempotent) and the lease itself expires with its ttl.
   */
  private releaseNow(leasesKey: string, leaseId: string): void {
    const carried = this.releases.take(leasesKey);
    const ids = carried === undefined ? [leaseId] : [leaseId, ...carried];
    this.redis.zrem(leasesKey, ...ids).catch(() => {
      if (carried !== undefined) this.releases.putBack(leasesKey, carried);
    });
  }

  /** Sends the releases no consume has carried yet (tests; close does it too). */
  flushReleases(): Promise<void> {
    return this.releases.flush();
  }

  async addCredits(ref: KeyRef, units: number, billingDay?: number): Promise<void> {
    const monthKey = this.names.key(ref).month;
    const now = this.clock === undefined ? '' : String(this.clock.now());
    await this.scripts.credits([monthKey], [now, String(units), '0', ...this.monthArgv(billingDay)]);
  }

  consumerUsage(consumer: ConsumerShare): Promise<ConsumerWindows> {
    return this.consumers.usage(consumer);
  }

  async addConsumerCredits(consumer: ConsumerShare, units: number): Promise<void> {
    const now = this.clock === undefined ? '' : String(this.clock.now());
    await this.scripts.credits(
      [this.names.consumer(consumer.id).month],
      [now, String(units), '0', ...this.monthArgv(consumer.billingDay)],
    );
  }

  moveWindows(from: KeyRef, to: KeyRef): Promise<void> {
    const source = this.names.key(from);
    const target = this.names.key(to);
    if (source.hash === target.hash) return Promise.resolve();
    return this.consumers.move(this.redis, source, target);
  }

  /** The month boundaries around this process's present (the script picks by Redis TIME). */
  private monthArgv(billingDay: number | undefined): readonly string[] {
    return this.months.argv(this.clock?.now() ?? Date.now(), billingDay ?? DEFAULT_BILLING_DAY);
  }

  private rememberBan(key: KeyRedisNames, bannedUntil: number): void {
    // Best effort: the ban itself is already in the key's hash; only the gauge would miss it.
    this.redis.zadd(this.names.bans, bannedUntil, key.banMember).catch(() => {});
  }

  async activeBans(): Promise<number> {
    // Ends are Redis TIME; this process's clock is close enough for a gauge.
    const now = this.clock?.now() ?? Date.now();
    const bans = this.names.bans;
    const replies = await this.redis.multi().zremrangebyscore(bans, '-inf', now).zcard(bans).exec();
    const [err, count] = replies?.[1] ?? [new Error('no reply to ZCARD'), 0];
    if (err) throw err;
    return Number(count);
  }

  async usage(ref: KeyRef, limits: WindowLimits, billingDay?: number): Promise<KeyUsage> {
    const key = this.names.key(ref);
    const argv = [this.clock === undefined ? '' : String(this.clock.now())];
    if (limits.perMonth !== undefined) argv.push(String(limits.perMonth), ...this.monthArgv(billingDay));
    const reply = this.sliding
      ? await this.scripts.slidingUsage([key.hash, key.log, key.month], argv)
      : await this.scripts.usage([key.hash, key.month], argv);
    const month = limits.perMonth === undefined ? null : monthCountOf(reply[5], reply[6], reply[8], reply[7]);
    return keyUsage({
      now: reply[0],
      minuteCount: reply[1],
      dayCount: reply[2],
      bannedUntil: reply[3],
      limits,
      minuteResetAt: reply[4] || undefined,
      month,
    });
  }

  resetWindows(ref: KeyRef, windows: readonly WindowName[], billingDay?: number): Promise<WindowsHeld> {
    return this.resetAt(this.names.key(ref), windows, billingDay);
  }

  resetConsumerWindows(consumer: ConsumerShare, windows: readonly WindowName[]): Promise<WindowsHeld> {
    return this.resetAt(this.names.consumer(consumer.id), windows, consumer.billingDay);
  }

  /** One RESET_WINDOWS_LUA on a key's or a consumer's windows (its hash, log and month). */
  private async resetAt(
    names: ConsumerRedisNames,
    windows: readonly WindowName[],
    billingDay: number | undefined,
  ): Promise<WindowsHeld> {
    const flag = (window: WindowName) => (windows.includes(window) ? '1' : '0');
    const argv = [
      this.clock === undefined ? '' : String(this.clock.now()),
      flag('minute'),
      this.sliding ? '1' : '0',
      flag('day'),
    ];
    if (windows.includes('month')) argv.push('0', ...this.monthArgv(billingDay));
    const reply = await this.scripts.resetWindows([names.hash, names.log, names.month], argv);
    const held: WindowsHeld = {};
    (['minute', 'day', 'month'] as const).forEach((window, i) => {
      if (reply[i]! >= 0) held[window] = reply[i];
    });
    return held;
  }

  async unban(ref: KeyRef): Promise<void> {
    const key = this.names.key(ref);
    await this.redis.hdel(key.hash, 'bu', 'rc', 're');
    await this.redis.zrem(this.names.bans, key.banMember);
  }

  /** Sends the pending releases; the client belongs to the caller, who quits it after. */
  close(): Promise<void> {
    return this.releases.flush();
  }
}
