import type { Clock } from '../shared/clock';
import type { RedisClient } from '../shared/redis';
import type { BanSettings, KeyDecision, KeyLimiter, KeyUsage, WindowLimits } from './types';
import { banPolicy, keyDecision, keyUsage, type OutcomeCode } from './windows';

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
 */
/**
 * The sorted set of banned key ids by ban end, `${namespace}:rl:bans`, read for the
 * `gateway_active_bans` gauge. It sits in its own slot, so the consume script cannot write it on a
 * Cluster: the gateway adds a key after the script reports a new ban (a rare second command, not
 * awaited by the request) and removes it on unban.
 */
export function activeBansRedisKey(namespace: string): string {
  return `${namespace}:rl:bans`;
}

export function keyLimiterRedisKey(namespace: string, keyId: string): string {
  return `${namespace}:rl:{${keyId}}`;
}

/**
 * ARGV: 1 perMinute, 2 perDay, 3 ban threshold, 4 ban window ms, 5 ban duration ms, 6 retain ms,
 * 7 now (epoch ms; absent: Redis TIME, so every gateway instance decides on one clock).
 * Reply: {outcome, now, minuteCount, dayCount, bannedUntil}; outcomes as in windows.ts.
 * Mirrors consumeKeyState in key-state.ts.
 */
/** Lua that sets `now` (epoch ms) from ARGV[index] when a test clock passed one, else from Redis TIME. */
function nowFromArgOrTime(index: number): string {
  return `if ARGV[${index}] then
  now = tonumber(ARGV[${index}])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end`;
}

const CONSUME_LUA = `
local key = KEYS[1]
local now
${nowFromArgOrTime(7)}
local f = redis.call('HMGET', key, 'mw', 'mc', 'dw', 'dc', 'bu', 'rc', 're')
local bannedUntil = tonumber(f[5]) or 0
if bannedUntil > now then
  return {2, now, 0, 0, bannedUntil}
end

local minute = math.floor(now / 60000)
local day = math.floor(now / 86400000)
local mc = 0
if tonumber(f[1]) == minute then mc = tonumber(f[2]) or 0 end
local dc = 0
local sameDay = tonumber(f[3]) == day
if sameDay then dc = tonumber(f[4]) or 0 end
local ttl = (day + 1) * 86400000 - now + tonumber(ARGV[6])

if mc < tonumber(ARGV[1]) and dc < tonumber(ARGV[2]) then
  mc = mc + 1
  dc = dc + 1
  redis.call('HSET', key, 'mw', minute, 'mc', mc, 'dw', day, 'dc', dc)
  if not sameDay then redis.call('PEXPIRE', key, ttl) end
  return {0, now, mc, dc, 0}
end

local rc = 1
local re = tonumber(f[7]) or 0
if re > now then
  rc = (tonumber(f[6]) or 0) + 1
else
  re = now + tonumber(ARGV[4])
end
if rc > tonumber(ARGV[3]) then
  bannedUntil = now + tonumber(ARGV[5])
  redis.call('HSET', key, 'bu', bannedUntil)
  redis.call('HDEL', key, 'rc', 're')
  redis.call('PEXPIRE', key, ttl)
  return {3, now, mc, dc, bannedUntil}
end
redis.call('HSET', key, 'rc', rc, 're', re)
redis.call('PEXPIRE', key, ttl)
return {1, now, mc, dc, 0}
`;

/** ARGV: 1 now (optional, as above). Reply: {now, minuteCount, dayCount, bannedUntil}. */
const USAGE_LUA = `
local now
${nowFromArgOrTime(1)}
local f = redis.call('HMGET', KEYS[1], 'mw', 'mc', 'dw', 'dc', 'bu')
local mc = 0
if tonumber(f[1]) == math.floor(now / 60000) then mc = tonumber(f[2]) or 0 end
local dc = 0
if tonumber(f[3]) == math.floor(now / 86400000) then dc = tonumber(f[4]) or 0 end
return {now, mc, dc, tonumber(f[5]) or 0}
`;

// Names of the custom commands on the client; prefixed so they cannot clash with anyone else's.
const CONSUME_COMMAND = 'asgKeyLimitConsume';
const USAGE_COMMAND = 'asgKeyLimitUsage';

interface KeyLimitCommands {
  [CONSUME_COMMAND](key: string, ...argv: string[]): Promise<[OutcomeCode, number, number, number, number]>;
  [USAGE_COMMAND](key: string, ...argv: string[]): Promise<[number, number, number, number]>;
}

export interface RedisKeyLimiterOptions {
  /** Prefix of every key, e.g. `asg:prod`; staging and production can share one Redis. */
  namespace: string;
  ban: BanSettings;
  /**
   * Takes `now` from this clock instead of Redis TIME. For tests: in production every instance
   * must decide on Redis's clock, so leave it unset.
   */
  clock?: Clock;
}

/**
 * Per-key windows and bans in Redis, shared by every gateway instance. Each consume is one script
 * call (EVALSHA, EVAL the first time on a connection): ban check, both windows, refusal counting
 * and the ban, atomically, so N instances never admit more than the limit. The client is the
 * caller's: close() leaves it open.
 */
export class RedisKeyLimiter implements KeyLimiter {
  private readonly commands: KeyLimitCommands;
  private readonly prefix: string;
  private readonly clock: Clock | undefined;
  // The ban part of ARGV never changes; converted to strings once.
  private readonly threshold: string;
  private readonly banWindowMs: string;
  private readonly banDurationMs: string;
  private readonly retainMs: string;
  private readonly bansKey: string;

  constructor(
    private readonly redis: RedisClient,
    options: RedisKeyLimiterOptions,
  ) {
    const ban = banPolicy(options.ban);
    this.threshold = String(ban.threshold);
    this.banWindowMs = String(ban.windowMs);
    this.banDurationMs = String(ban.durationMs);
    this.retainMs = String(ban.retainMs);
    this.prefix = `${options.namespace}:rl:{`;
    this.bansKey = activeBansRedisKey(options.namespace);
    this.clock = options.clock;
    redis.defineCommand(CONSUME_COMMAND, { numberOfKeys: 1, lua: CONSUME_LUA });
    redis.defineCommand(USAGE_COMMAND, { numberOfKeys: 1, lua: USAGE_LUA });
    this.commands = redis as unknown as KeyLimitCommands;
  }

  async consume(keyId: string, limits: WindowLimits): Promise<KeyDecision> {
    const key = this.prefix + keyId + '}';
    const perMinute = String(limits.perMinute);
    const perDay = String(limits.perDay);
    const reply =
      this.clock === undefined
        ? await this.commands[CONSUME_COMMAND](key, perMinute, perDay, this.threshold, this.banWindowMs, this.banDurationMs, this.retainMs)
        : await this.commands[CONSUME_COMMAND](
            key,
            perMinute,
            perDay,
            this.threshold,
            this.banWindowMs,
            this.banDurationMs,
            this.retainMs,
            String(this.clock.now()),
          );
    const decision = keyDecision(reply[0], reply[1], reply[2], reply[3], reply[4], limits);
    if (decision.outcome === 'limited' && decision.bannedNow) this.rememberBan(keyId, reply[4]);
    return decision;
  }

  private rememberBan(keyId: string, bannedUntil: number): void {
    // Best effort: the ban itself is already in the key's hash; only the gauge would miss it.
    this.redis.zadd(this.bansKey, bannedUntil, keyId).catch(() => {});
  }

  async activeBans(): Promise<number> {
    // Ends are Redis TIME; this process's clock is close enough for a gauge.
    const now = this.clock?.now() ?? Date.now();
    const replies = await this.redis.multi().zremrangebyscore(this.bansKey, '-inf', now).zcard(this.bansKey).exec();
    const [err, count] = replies?.[1] ?? [new Error('no reply to ZCARD'), 0];
    if (err) throw err;
    return Number(count);
  }

  async usage(keyId: string, limits: WindowLimits): Promise<KeyUsage> {
    const key = this.prefix + keyId + '}';
    const reply =
      this.clock === undefined
        ? await this.commands[USAGE_COMMAND](key)
        : await this.commands[USAGE_COMMAND](key, String(this.clock.now()));
    return keyUsage(reply[0], reply[1], reply[2], reply[3], limits);
  }

  async unban(keyId: string): Promise<void> {
    await this.redis.hdel(this.prefix + keyId + '}', 'bu', 'rc', 're');
    await this.redis.zrem(this.bansKey, keyId);
  }

  /** The client belongs to the caller, who quits it; nothing else is held. */
  async close(): Promise<void> {}
}
