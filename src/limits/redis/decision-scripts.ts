import { defineLuaScript, type LuaScript } from '../../shared/redis/lua-script';
import { EXPIRY_SLACK_MS } from '../windows/windows';
import { luaScript, type KeySlot } from './lua-model';
import { LEASE_ARGV_FIELDS, LEASE_FUNCTIONS, leaseConsumeLua } from './lease-scripts';

/**
 * The scripts of the Redis key limiter, each assembled from the Lua model (lua-model.ts). A script
 * is its KEYS (a list of slots: the locals its body names them by, and the order scriptKeys puts a
 * call's names in) and a body that calls the model's fragments.
 */
export interface ModelScript<Reply> {
  script: LuaScript<Reply>;
  keys: readonly KeySlot[];
}

function modelScript<Reply>(name: string, keys: readonly KeySlot[], body: string): ModelScript<Reply> {
  return { script: defineLuaScript<Reply>(name, luaScript(keys, body), keys.length), keys };
}

/** How a consume decides: the minute's shape, and whether the key's consumer's windows are decided with it. */
export interface ConsumeVariant {
  sliding: boolean;
  consumer: boolean;
  /**
   * Leases of units (lease-scripts.ts; fixed minute only): the carried return first, and the
   * admission counts a lease's units with the request's; the reply ends with both (leaseTail).
   */
  lease?: boolean;
}

/**
 * ARGV of every consume: 1 perMinute, 2 perDay, 3 ban threshold, 4 ban window ms, 5 ban duration ms,
 * 6 retain ms (how long a key's hash outlives its day: any refusal window or ban started that day),
 * 7 shadow ('1' or '0': a refusal counts toward no ban), 8 now ('' for Redis TIME; '<' and a deadline
 * in Redis time for Redis TIME and nothing done past it: command-deadline.ts), 9 cost (units of
 * every window), 10 maxInFlight ('' for none), 11 the lease id, 12 its ttl ms, 13 perMonth ('' or
 * absent for none), 14..17 the month's boundaries (read_month). With a consumer: 18 its perMinute,
 * 19 perDay, 20 perMonth (each '' for none), 21..24 its month's boundaries (its own billing day).
 * Then, from RELEASES_AT, the lease releases the consume carries (removed first, whatever the decision).
 */
export const CONSUME_ARGV = { ownMonthAt: 13, consumerAt: 18 } as const;

/** ARGV index of the first lease release a consume carries: after the key's month, or the consumer's. */
export function releasesAt(variant: ConsumeVariant): number {
  return leaseAt(variant) + (variant.lease === true ? LEASE_ARGV_FIELDS : 0);
}

/** ARGV index of a lease consume's first lease field (lease-scripts.ts leaseArgv): where the releases start in the others. */
function leaseAt(variant: ConsumeVariant): number {
  return variant.consumer ? 25 : 18;
}

/** KEYS of a consume: the key's hash, (sliding) log, month and leases, then its consumer's hash, (sliding) log, month. */
export function consumeKeySlots(variant: ConsumeVariant): KeySlot[] {
  const own: KeySlot[] = variant.sliding ? ['hash', 'log', 'mkey', 'ifkey'] : ['hash', 'mkey', 'ifkey'];
  if (!variant.consumer) return own;
  return [...own, ...(variant.sliding ? (['chash', 'clog', 'cmkey'] as const) : (['chash', 'cmkey'] as const))];
}

/**
 * One consume, all four variants: the carried releases, the ban, the key's windows and month (and
 * its consumer's), the lease, the room test, then an admission or a refusal. A refusal consumes
 * nothing; counted toward the key's ban unless shadowed. A consumer's minute log is kept only when
 * it has a perMinute. Mirrors consumeKeyState (key-state.ts) and consumer-state.ts.
 */
export function consumeLua(variant: ConsumeVariant): string {
  const { sliding, consumer } = variant;
  const log = sliding ? 'log' : 'nil';
  const clog = sliding ? "ARGV[18] ~= '' and clog or nil" : 'nil';
  const holders = consumer ? 'k, km, c, cm' : 'k, km';
  const nothing = consumer ? 'no_windows(), no_month(), no_windows(), no_month()' : 'no_windows(), no_month()';
  const lease = variant.lease === true ? leaseConsumeLua(leaseAt(variant), consumer) : undefined;
  const reply = lease ? 'lease_reply' : 'decision_reply';
  const units = lease ? 'taken' : 'cost';
  return `${lease ? LEASE_FUNCTIONS : ''}release_leases(ifkey, ARGV, ${releasesAt(variant)})
local now = clock_now(ARGV[8])
if past_deadline(ARGV[8], now) then return redis.error_reply('LATE ' .. now) end
local cost = tonumber(ARGV[9])
${lease ? lease.start : ''}
local f = redis.call('HMGET', hash, 'mw', 'mc', 'dw', 'dc', 'bu', 'rc', 're')
local banned_until = tonumber(f[5]) or 0
if banned_until > now then return ${reply}(2, now, banned_until, 0, ${nothing}) end
local ttl = (math.floor(now / 86400000) + 1) * 86400000 - now + tonumber(ARGV[6])
local k = fixed_windows(f[1], f[2], f[3], f[4], now)
${sliding ? 'sliding_minute(log, now, k)' : ''}
local km = read_month(mkey, now, ARGV[13], ARGV[14], ARGV[15], ARGV[16], ARGV[17])
local room = has_room(k, km, cost, tonumber(ARGV[1]), tonumber(ARGV[2]))
${consumer ? consumerRead(sliding, clog) : ''}
local max_in_flight = tonumber(ARGV[10])
local slot, held = lease_room(ifkey, now, max_in_flight)
if not slot then return ${reply}(4, now, 0, 0, ${holders}) end
if room then
  ${lease ? lease.take : ''}
  admit_windows(hash, ${sliding}, ${log}, k, now, ${units}, ttl)
  add_to_month(mkey, km, now, ${units}, 0)
  ${consumer ? consumerAdmit(sliding, clog, units) : ''}
  held = hold_lease(ifkey, now, max_in_flight, held, ARGV[11], tonumber(ARGV[12]))
  return ${reply}(0, now, 0, held, ${holders})
end
sliding_freeing(${log}, k, cost, tonumber(ARGV[1]))
${consumer ? `sliding_freeing(${clog}, c, cost, tonumber(ARGV[18]))` : ''}
if ARGV[7] == '1' then return ${reply}(1, now, 0, 0, ${holders}) end
local outcome, ends = count_refusal(hash, now, f[6], f[7], ttl, tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]))
return ${reply}(outcome, now, ends, 0, ${holders})
`;
}

/** The consumer's windows and month read, its room anded into the key's. */
function consumerRead(sliding: boolean, clog: string): string {
  return `local cf = redis.call('HMGET', chash, 'mw', 'mc', 'dw', 'dc')
local c = fixed_windows(cf[1], cf[2], cf[3], cf[4], now)
${sliding ? `sliding_minute(${clog}, now, c)` : ''}
local cm = read_month(cmkey, now, ARGV[20], ARGV[21], ARGV[22], ARGV[23], ARGV[24])
room = room and has_room(c, cm, cost, tonumber(ARGV[18]), tonumber(ARGV[19]))`;
}

/** The consumer's units of an admission: its hash holds no ban, so it is kept only to the end of its day. */
function consumerAdmit(sliding: boolean, clog: string, units: string): string {
  const dayEnd = `(math.floor(now / 86400000) + 1) * 86400000 - now + ${EXPIRY_SLACK_MS}`;
  return `admit_windows(chash, ${sliding}, ${sliding ? clog : 'nil'}, c, now, ${units}, ${dayEnd})
  add_to_month(cmkey, cm, now, ${units}, 0)`;
}

/**
 * A holder's windows, read only: its hash, (sliding) log and month. ARGV: 1 now ('' for Redis TIME),
 * and from `monthAt` perMonth ('' or absent for none) and the month's boundaries. `slidingIf` is the
 * Lua condition under which the minute is the log's. A key's read answers its ban's end; a
 * consumer's windows come back in the reply's consumer place.
 */
function usageLua(holder: 'key' | 'consumer', slidingIf: string, monthAt: number): string {
  const month = [0, 1, 2, 3, 4].map((i) => `ARGV[${monthAt + i}]`).join(', ');
  const reply =
    holder === 'key'
      ? 'decision_reply(0, now, tonumber(f[5]) or 0, 0, w, m)'
      : 'decision_reply(0, now, 0, 0, no_windows(), no_month(), w, m)';
  return `local now = clock_now(ARGV[1])
local f = redis.call('HMGET', hash, 'mw', 'mc', 'dw', 'dc', 'bu')
local w = fixed_windows(f[1], f[2], f[3], f[4], now)
${slidingIf === 'false' ? '' : `if ${slidingIf} then peek_sliding_minute(log, now, w) end`}
local m = read_month(mkey, now, ${month})
return ${reply}
`;
}

/**
 * Credits: KEYS the month hash. ARGV 1 now ('' as above), 2 units, 3 a placeholder for perMonth (any
 * number), 4..7 the month boundaries. Adds the units to the month holding now, starting the month
 * afresh when the hash holds an earlier one. Reply: the month's credits now.
 */
const CREDITS_LUA = `local now = clock_now(ARGV[1])
local m = read_month(mkey, now, ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7])
add_to_month(mkey, m, now, 0, tonumber(ARGV[2]))
return m.credits
`;

/**
 * A window reset (window-reset.ts; POST /admin/…/windows/reset), for a key's windows or a consumer's
 * (the same layout). KEYS: the hash, the sliding log, the month hash. ARGV: 1 now ('' as above), 2 the
 * minute ('1' to reset), 3 its shape ('1' sliding), 4 the day ('1'), and to reset the month 5 a
 * placeholder for perMonth (any number) and 6..9 its boundaries. One script, so Redis runs it between
 * two consumes: a request counts before it (and is forgotten) or after it. A window starts again from
 * the units still out in leases (lease-scripts.ts leased_out), else from zero; the month's credits
 * stay. Reply: the units the minute, day and month held (-1: not reset).
 */
const RESET_WINDOWS_LUA = `${LEASE_FUNCTIONS}local now = clock_now(ARGV[1])
local f = redis.call('HMGET', hash, 'mw', 'mc', 'dw', 'dc')
local w = fixed_windows(f[1], f[2], f[3], f[4], now)
local held = {-1, -1, -1}
-- Units out in leases (any instance's) stay counted: a window starts again from them, not from zero,
-- never from more than it holds (a lease alive now counted in the windows of now).
local out = leased_out(hash, now)
if ARGV[2] == '1' then
  if ARGV[3] == '1' then
    peek_sliding_minute(log, now, w)
    redis.call('DEL', log)
  elseif math.min(out, w.mc) > 0 then
    redis.call('HSET', hash, 'mw', math.floor(now / 60000), 'mc', math.min(out, w.mc))
  else
    redis.call('HDEL', hash, 'mw', 'mc')
  end
  held[1] = w.mc
end
if ARGV[4] == '1' then
  held[2] = w.dc
  if math.min(out, w.dc) > 0 then
    redis.call('HSET', hash, 'dw', math.floor(now / 86400000), 'dc', math.min(out, w.dc))
  else
    redis.call('HDEL', hash, 'dw', 'dc')
  end
  if ARGV[3] == '1' and ARGV[2] ~= '1' then
    -- The sliding log names an admission <time>-<day count>: with the day counting from zero again, one
    -- admitted in this same instant would take the name of one before the reset (and count once for two).
    local same = redis.call('ZRANGEBYSCORE', log, now, '+inf', 'WITHSCORES')
    for i = 1, #same, 2 do
      redis.call('ZREM', log, same[i])
      redis.call('ZADD', log, same[i + 1], 'r' .. same[i])
    end
  end
end
local m = read_month(mkey, now, ARGV[5], ARGV[6], ARGV[7], ARGV[8], ARGV[9])
if m.limit then
  held[3] = m.count
  -- rs: when the month was reset; a lease's units it did not count never come back off it (lease-scripts.ts give_back).
  if m.count > 0 then redis.call('HSET', mkey, 'c', math.min(out, m.count), 'rs', now) end
end
if held[1] > 0 or held[2] > 0 then
  -- A hash the reset emptied is gone: written again with rs alone, it lives a minute (a lease's return comes within one).
  local gone = redis.call('EXISTS', hash) == 0
  redis.call('HSET', hash, 'rs', now)
  if gone then redis.call('PEXPIRE', hash, 60000) end
end
return held
`;

// Names of the custom commands on the client; prefixed so they cannot clash with anyone else's.
function consumeScript(variant: ConsumeVariant): ModelScript<number[]> {
  const kind = `${variant.sliding ? 'Sliding' : ''}${variant.lease === true ? 'Lease' : ''}`;
  const name = `${variant.consumer ? 'asgConsumerLimit' : 'asgKeyLimit'}${kind}Consume`;
  return modelScript<number[]>(name, consumeKeySlots(variant), consumeLua(variant));
}

/** The four consumes: [key alone, with its consumer] by shape. */
export const CONSUME_SCRIPTS = {
  fixed: [consumeScript({ sliding: false, consumer: false }), consumeScript({ sliding: false, consumer: true })],
  sliding: [consumeScript({ sliding: true, consumer: false }), consumeScript({ sliding: true, consumer: true })],
} as const;

/** The lease consumes (fixed minute only): [key alone, with its consumer]. */
export const LEASE_CONSUME_SCRIPTS = [
  consumeScript({ sliding: false, consumer: false, lease: true }),
  consumeScript({ sliding: false, consumer: true, lease: true }),
] as const;

/** A key's windows read: ARGV 1 now, 2 perMonth, 3..6 its boundaries. */
export const USAGE_SCRIPTS = {
  fixed: modelScript<number[]>('asgKeyLimitUsage', ['hash', 'mkey'], usageLua('key', 'false', 2)),
  sliding: modelScript<number[]>('asgKeyLimitSlidingUsage', ['hash', 'log', 'mkey'], usageLua('key', 'true', 2)),
} as const;

/** A consumer's windows read: ARGV 1 now, 2 its minute slides ('1': sliding with a perMinute), 3 perMonth, 4..7 its boundaries. */
export const CONSUMER_USAGE_SCRIPT = modelScript<number[]>(
  'asgConsumerLimitUsage',
  ['hash', 'log', 'mkey'],
  usageLua('consumer', "ARGV[2] == '1'", 3),
);

export const CREDITS_SCRIPT = modelScript<number>('asgKeyLimitCredits', ['mkey'], CREDITS_LUA);

export const RESET_WINDOWS_SCRIPT = modelScript<[number, number, number]>(
  'asgKeyLimitResetWindows',
  ['hash', 'log', 'mkey'],
  RESET_WINDOWS_LUA,
);
