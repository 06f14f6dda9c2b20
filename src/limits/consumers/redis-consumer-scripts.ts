import { EXPIRY_SLACK_MS } from '../windows/windows';
import { IN_FLIGHT_HOLD_LUA, inFlightCheckLua, inFlightReleaseLua } from '../in-flight/redis-in-flight';
import { refusalLua } from '../redis/redis-refusal';

/**
 * The Lua of a key's request decided together with its consumer's windows (CONTRACT §4): the key's
 * ban, its minute, day and month, and the consumer's minute, day and month, all in one script, so
 * one round trip; every Redis key it touches carries the consumer's hash tag (redis/redis-names.ts), so it
 * runs on a Cluster as on one Redis. Mirrors the key's own scripts in redis-key-limiter.ts, with the
 * consumer's windows added to the admission test and to the counting.
 *
 * ARGV (both shapes): 1 perMinute, 2 perDay, 3 ban threshold, 4 ban window ms, 5 ban duration ms,
 * 6 retain ms, 7 shadow ('1'/'0'), 8 now ('' for Redis TIME), 9 cost, 10..12 the key's in-flight
 * lease (redis-in-flight.ts: maxInFlight is the key's, as without a consumer), 13 the key's perMonth
 * ('' for none), 14..17 its month boundaries, 18 the consumer's perMinute, 19 perDay, 20 perMonth
 * (each '' for none), 21..24 the consumer's month boundaries (its own billing day), from 25 on the
 * lease releases the consume carries (removed first).
 * Reply: the key's ten fields as in redis-key-limiter.ts (outcome 4: refused by maxInFlight, nothing
 * counted), then the consumer's minute count, day count, month count, month credits, month end,
 * month start, minute reset (0: the UTC minute's end); an admission adds the leases the key's set
 * holds with its own (redis-in-flight.ts, IN_FLIGHT_HOLD_LUA).
 */

const NOW_LUA = `local now
if ARGV[8] ~= '' then
  now = tonumber(ARGV[8])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end`;

/** Reads a month hash into `<p>ms`, `<p>me`, `<p>oc`, `<p>ok` and `<p>monthLimit` (nil when ARGV[at] is ''). */
function monthRead(p: string, hashKey: string, at: number): string {
  return `local ${p}monthLimit = nil
local ${p}ms, ${p}me, ${p}oc, ${p}ok = 0, 0, 0, 0
if ARGV[${at}] ~= '' then
  ${p}ms = tonumber(ARGV[${at + 2}])
  ${p}me = tonumber(ARGV[${at + 3}])
  if now < ${p}ms then
    ${p}me = ${p}ms
    ${p}ms = tonumber(ARGV[${at + 1}])
  elseif now >= ${p}me then
    ${p}ms = ${p}me
    ${p}me = tonumber(ARGV[${at + 4}])
  end
  local g = redis.call('HMGET', ${hashKey}, 'w', 'c', 'k')
  if tonumber(g[1]) == ${p}ms then
    ${p}oc = tonumber(g[2]) or 0
    ${p}ok = tonumber(g[3]) or 0
  end
  ${p}monthLimit = tonumber(ARGV[${at}]) + ${p}ok
end`;
}

function monthAdmit(p: string, hashKey: string): string {
  return `if ${p}monthLimit then
  if ${p}oc == 0 and ${p}ok == 0 then
    redis.call('HSET', ${hashKey}, 'w', ${p}ms, 'c', cost, 'k', 0)
    redis.call('PEXPIRE', ${hashKey}, ${p}me - now + ${EXPIRY_SLACK_MS})
  else
    redis.call('HINCRBY', ${hashKey}, 'c', cost)
  end
  ${p}oc = ${p}oc + cost
end`;
}

/** ARGV index of the first lease release a consume carries (after the consumer's month). */
const RELEASES_AT = 25;

const CONSUMER_TAIL = 'cmc, cdc, coc, cok, cme, cms, cMinuteResetAt';

/** The consumer's room test: every window it has a limit for takes `cost` more. */
const CONSUMER_ROOM = `(ARGV[18] == '' or cmc + cost <= tonumber(ARGV[18])) and (ARGV[19] == '' or cdc + cost <= tonumber(ARGV[19])) and (not cmonthLimit or coc + cost <= cmonthLimit)`;
const KEY_ROOM = `mc + cost <= tonumber(ARGV[1]) and dc + cost <= tonumber(ARGV[2]) and (not monthLimit or oc + cost <= monthLimit)`;

/**
 * The consumer's hash after an admission: `fields` (its minute with a fixed minute) and its day in
 * one HSET, kept to the end of its day (it holds no ban), so the consumer costs one read and one
 * write per request.
 */
function consumerAdmit(fields: string): string {
  return `cdc = cdc + cost
redis.call('HSET', ckey, ${fields}'dw', day, 'dc', cdc)
if not cSameDay then redis.call('PEXPIRE', ckey, (day + 1) * 86400000 - now + ${EXPIRY_SLACK_MS}) end`;
}

const BANNED_REPLY = `return {2, now, 0, 0, bannedUntil, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}`;

/**
 * Fixed minute. KEYS: 1 the key's hash, 2 its month hash, 3 its in-flight leases, 4 the consumer's
 * hash, 5 its month hash.
 */
export const CONSUMER_CONSUME_LUA = `
local key, mkey, ifkey, ckey, cmkey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
${inFlightReleaseLua(RELEASES_AT)}
${NOW_LUA}
local cost = tonumber(ARGV[9])
local f = redis.call('HMGET', key, 'mw', 'mc', 'dw', 'dc', 'bu', 'rc', 're')
local bannedUntil = tonumber(f[5]) or 0
if bannedUntil > now then
  ${BANNED_REPLY}
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
${monthRead('', 'mkey', 13)}
local cf = redis.call('HMGET', ckey, 'mw', 'mc', 'dw', 'dc')
local cmc = 0
if tonumber(cf[1]) == minute then cmc = tonumber(cf[2]) or 0 end
local cdc = 0
local cSameDay = tonumber(cf[3]) == day
if cSameDay then cdc = tonumber(cf[4]) or 0 end
local cMinuteResetAt = 0
${monthRead('c', 'cmkey', 20)}
${inFlightCheckLua(CONSUMER_TAIL)}

if ${KEY_ROOM} and ${CONSUMER_ROOM} then
  mc = mc + cost
  dc = dc + cost
  redis.call('HSET', key, 'mw', minute, 'mc', mc, 'dw', day, 'dc', dc)
  if not sameDay then redis.call('PEXPIRE', key, ttl) end
  ${monthAdmit('', 'mkey')}
  cmc = cmc + cost
  ${consumerAdmit("'mw', minute, 'mc', cmc, ")}
  ${monthAdmit('c', 'cmkey')}
  ${IN_FLIGHT_HOLD_LUA}
  return {0, now, mc, dc, 0, 0, oc, ok, me, ms, ${CONSUMER_TAIL}, held}
end
${refusalLua(6, CONSUMER_TAIL)}
`;

/** Prunes a sliding log and sets `<p>mc` and `<p>MinuteResetAt` from it. */
function slidingRead(p: string, log: string, limitAt: number): string {
  const count = p === '' ? 'mc' : `${p}mc`;
  const reset = p === '' ? 'minuteResetAt' : `${p}MinuteResetAt`;
  return `local ${count} = 0
local ${reset} = now + 60000
if ARGV[${limitAt}] ~= '' then
  redis.call('ZREMRANGEBYSCORE', ${log}, '-inf', now - 60000)
  ${count} = redis.call('ZCARD', ${log})
  if ${count} > 0 then ${reset} = tonumber(redis.call('ZRANGE', ${log}, 0, 0, 'WITHSCORES')[2]) + 60000 end
end`;
}

/** For a refused cost of several units: when enough admissions leave the sliding minute. */
function slidingFreeing(count: string, reset: string, log: string, limitAt: number): string {
  return `if cost > 1 and ${count} > 0 and ARGV[${limitAt}] ~= '' then
  local nth = math.max(1, ${count} + cost - tonumber(ARGV[${limitAt}]))
  local at = redis.call('ZRANGE', ${log}, nth - 1, nth - 1, 'WITHSCORES')[2]
  if at then ${reset} = tonumber(at) + 60000 end
end`;
}

/**
 * Sliding minute. KEYS: 1 the key's hash, 2 its log, 3 its month hash, 4 its in-flight leases, 5 the
 * consumer's hash, 6 its log, 7 its month hash. The consumer's log is kept only when it has a perMinute; its members are
 * `now-<consumer day count>`, unique as that count grows with every unit admitted.
 */
export const SLIDING_CONSUMER_CONSUME_LUA = `
local key, log, mkey, ifkey, ckey, clog, cmkey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
${inFlightReleaseLua(RELEASES_AT)}
${NOW_LUA}
local cost = tonumber(ARGV[9])
local f = redis.call('HMGET', key, 'dw', 'dc', 'bu', 'rc', 're')
local bannedUntil = tonumber(f[3]) or 0
if bannedUntil > now then
  ${BANNED_REPLY}
end
local day = math.floor(now / 86400000)
local dc = 0
local sameDay = tonumber(f[1]) == day
if sameDay then dc = tonumber(f[2]) or 0 end
local ttl = (day + 1) * 86400000 - now + tonumber(ARGV[6])
${slidingRead('', 'log', 1)}
${monthRead('', 'mkey', 13)}
local cf = redis.call('HMGET', ckey, 'dw', 'dc')
local cdc = 0
local cSameDay = tonumber(cf[1]) == day
if cSameDay then cdc = tonumber(cf[2]) or 0 end
${slidingRead('c', 'clog', 18)}
${monthRead('c', 'cmkey', 20)}
${inFlightCheckLua(CONSUMER_TAIL)}

if ${KEY_ROOM} and ${CONSUMER_ROOM} then
  for i = 1, cost do
    redis.call('ZADD', log, now, now .. '-' .. (dc + i))
  end
  mc = mc + cost
  dc = dc + cost
  redis.call('PEXPIRE', log, 61000)
  redis.call('HSET', key, 'dw', day, 'dc', dc)
  if not sameDay then redis.call('PEXPIRE', key, ttl) end
  ${monthAdmit('', 'mkey')}
  if ARGV[18] ~= '' then
    for i = 1, cost do
      redis.call('ZADD', clog, now, now .. '-' .. (cdc + i))
    end
    redis.call('PEXPIRE', clog, 61000)
    cmc = cmc + cost
  end
  ${consumerAdmit('')}
  ${monthAdmit('c', 'cmkey')}
  ${IN_FLIGHT_HOLD_LUA}
  return {0, now, mc, dc, 0, minuteResetAt, oc, ok, me, ms, ${CONSUMER_TAIL}, held}
end
${slidingFreeing('mc', 'minuteResetAt', 'log', 1)}
${slidingFreeing('cmc', 'cMinuteResetAt', 'clog', 18)}
${refusalLua(4, CONSUMER_TAIL)}
`;

/**
 * A consumer's windows, read only. KEYS: 1 its hash, 2 its log, 3 its month hash. ARGV: 1 now ('' as
 * above; read as ARGV[8] would be, so it is copied), 2 sliding ('1'/'0'), 3 perMonth ('' for none),
 * 4..7 the month boundaries. Reply: {now, minuteCount, dayCount, minuteResetAt (0: UTC minute),
 * monthCount, monthCredits, monthEnd, monthStart}.
 */
export const CONSUMER_USAGE_LUA = `
local ckey, clog, cmkey = KEYS[1], KEYS[2], KEYS[3]
local now
if ARGV[1] ~= '' then
  now = tonumber(ARGV[1])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local f = redis.call('HMGET', ckey, 'mw', 'mc', 'dw', 'dc')
local cmc = 0
local reset = 0
if ARGV[2] == '1' then
  local from = '(' .. (now - 60000)
  cmc = redis.call('ZCOUNT', clog, from, '+inf')
  reset = now + 60000
  if cmc > 0 then reset = tonumber(redis.call('ZRANGEBYSCORE', clog, from, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)[2]) + 60000 end
elseif tonumber(f[1]) == math.floor(now / 60000) then
  cmc = tonumber(f[2]) or 0
end
local cdc = 0
if tonumber(f[3]) == math.floor(now / 86400000) then cdc = tonumber(f[4]) or 0 end
${monthRead('c', 'cmkey', 3)}
return {now, cmc, cdc, reset, coc, cok, cme, cms}
`;

/**
 * Moves a key's windows into another place (redis/redis-names.ts), adding to what is there. KEYS: 1 the
 * target hash, 2 its month hash, 3 its log. ARGV: 1 the source hash as flat field/value pairs
 * joined by ',', 2 the source month's w, c, k joined by ',' ('' for none), then the log's score,
 * member pairs. Windows of the same index add up; a later one wins; the later ban end wins.
 */
export const MOVE_WINDOWS_LUA = `
local function split(s)
  local out = {}
  for part in string.gmatch(s, '[^,]+') do table.insert(out, part) end
  return out
end
local src = {}
local parts = split(ARGV[1])
for i = 1, #parts, 2 do src[parts[i]] = tonumber(parts[i + 1]) end
local function merge(wf, cf)
  if not src[wf] then return end
  local g = redis.call('HMGET', KEYS[1], wf, cf)
  local w, c = tonumber(g[1]), tonumber(g[2]) or 0
  if w == src[wf] then
    redis.call('HSET', KEYS[1], cf, c + (src[cf] or 0))
  elseif not w or w < src[wf] then
    redis.call('HSET', KEYS[1], wf, src[wf], cf, src[cf] or 0)
  end
end
merge('mw', 'mc')
merge('dw', 'dc')
if src['bu'] then
  local bu = tonumber(redis.call('HGET', KEYS[1], 'bu')) or 0
  if src['bu'] > bu then redis.call('HSET', KEYS[1], 'bu', src['bu']) end
end
if src['rc'] and src['re'] then redis.call('HSET', KEYS[1], 'rc', src['rc'], 're', src['re']) end
if src['pttl'] and src['pttl'] > 0 then
  local t = redis.call('PTTL', KEYS[1])
  if t < src['pttl'] then redis.call('PEXPIRE', KEYS[1], src['pttl']) end
end
if ARGV[2] ~= '' then
  local m = split(ARGV[2])
  local g = redis.call('HMGET', KEYS[2], 'w', 'c', 'k')
  local w = tonumber(g[1])
  if w == tonumber(m[1]) then
    redis.call('HSET', KEYS[2], 'c', (tonumber(g[2]) or 0) + tonumber(m[2]), 'k', (tonumber(g[3]) or 0) + tonumber(m[3]))
  elseif not w or w < tonumber(m[1]) then
    redis.call('HSET', KEYS[2], 'w', m[1], 'c', m[2], 'k', m[3])
  end
  if tonumber(m[4]) > 0 then redis.call('PEXPIRE', KEYS[2], tonumber(m[4])) end
end
for i = 3, #ARGV, 2 do redis.call('ZADD', KEYS[3], ARGV[i], ARGV[i + 1]) end
if #ARGV > 2 then redis.call('PEXPIRE', KEYS[3], 61000) end
return 1
`;
