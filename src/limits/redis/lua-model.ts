import { EXPIRY_SLACK_MS } from '../windows/windows';
import type { ConsumerRedisNames, KeyRedisNames } from './redis-names';

/**
 * The Lua model of a decision: one set of Lua functions (the fragments) from which every script of
 * the Redis key limiter is assembled, the key's own and a consumer's key's, fixed or sliding minute.
 * Each fragment is a Lua function that gets what it uses as arguments (ARGV values included): none
 * reads a variable of the script around it. A script is `luaScript(keys, body)`: the fragments, then
 * its KEYS bound to locals of the names the caller lists (KeySlot, in the order the caller passes
 * them: scriptKeys builds that array from the same list), then its body, which calls the fragments.
 *
 * The values the fragments pass around (times in epoch ms):
 *
 *   windows  {mc, dc, same_day, reset}: a holder's (a key's or a consumer's) minute and day counts,
 *            whether its hash holds today's day already, and when its minute frees a unit (0: the end
 *            of the UTC minute; a sliding minute sets it)
 *   month    {limit, start, stop, count, credits}: its billing month (limit = perMonth + credits,
 *            nil without a month window)
 *
 * A hash of windows holds mw, mc (minute index floor(now / 60000) and its count, fixed minute only),
 * dw, dc (day index and count), bt (when a fixed one began counting: a new hash or a new day), and
 * for a key bu (banned until), rc, re (refusals toward a ban and the end of their window); a month
 * hash w, c, k, bt (start, count, credits, when it began counting); a sliding log one member
 * `<now>-<day count>` per admitted unit, scored by its time; a key's leases one member per lease,
 * scored by its expiry. Windows roll over by index, not by key expiry, so a script that takes `now`
 * from an injected clock (tests) behaves exactly like one that reads Redis TIME.
 *
 * Every script that answers windows answers the one reply `decision_reply` builds, decoded by
 * decision-reply.ts (its layout is written there).
 */
export const LUA_FUNCTIONS = `
-- Epoch ms: \`arg\` when a test clock passed one, else Redis TIME (every instance decides on one clock).
-- A consume's \`arg\` may be '<' and a deadline instead (command-deadline.ts): Redis TIME too.
local function clock_now(arg)
  if arg and arg ~= '' and string.sub(arg, 1, 1) ~= '<' then return tonumber(arg) end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Whether the caller gave up on this command before Redis ran it (\`arg\` '<' and its deadline).
local function past_deadline(arg, now)
  return arg and string.sub(arg, 1, 1) == '<' and now > tonumber(string.sub(arg, 2))
end

-- Windows of nothing counted (a ban's reply, a holder not in the script).
local function no_windows()
  return {mc = 0, dc = 0, same_day = false, reset = 0}
end

-- A month window that is not there.
local function no_month()
  return {limit = nil, start = 0, stop = 0, count = 0, credits = 0}
end

-- A holder's fixed minute and day at \`now\` from its hash's mw, mc, dw, dc (as HMGET answers them).
local function fixed_windows(mw, mc, dw, dc, now)
  local w = no_windows()
  if tonumber(mw) == math.floor(now / 60000) then w.mc = tonumber(mc) or 0 end
  if tonumber(dw) == math.floor(now / 86400000) then
    w.same_day = true
    w.dc = tonumber(dc) or 0
  end
  return w
end

-- A sliding minute into w: the log pruned to the last 60 s and counted; w.reset is when its oldest
-- admission leaves (now + 60 s when it is empty). No log (a consumer without perMinute): it counts nothing.
local function sliding_minute(log, now, w)
  w.mc = 0
  w.reset = now + 60000
  if not log then return end
  redis.call('ZREMRANGEBYSCORE', log, '-inf', now - 60000)
  w.mc = redis.call('ZCARD', log)
  if w.mc > 0 then w.reset = tonumber(redis.call('ZRANGE', log, 0, 0, 'WITHSCORES')[2]) + 60000 end
end

-- The same, read only (a usage read prunes nothing).
local function peek_sliding_minute(log, now, w)
  local from = '(' .. (now - 60000)
  w.mc = redis.call('ZCOUNT', log, from, '+inf')
  w.reset = now + 60000
  if w.mc > 0 then
    w.reset = tonumber(redis.call('ZRANGEBYSCORE', log, from, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)[2]) + 60000
  end
end

-- The billing month holding \`now\` (per_month '' or nil: none). The caller's clock may be a little off
-- Redis TIME, so it passes four boundaries (the month before's start, this month's start and end, the
-- next month's end) and the month is picked here; a hash holding another month counts as empty.
local function read_month(mkey, now, per_month, before_start, start, stop, next_stop)
  local m = no_month()
  if not per_month or per_month == '' then return m end
  m.start = tonumber(start)
  m.stop = tonumber(stop)
  if now < m.start then
    m.stop = m.start
    m.start = tonumber(before_start)
  elseif now >= m.stop then
    m.start = m.stop
    m.stop = tonumber(next_stop)
  end
  local g = redis.call('HMGET', mkey, 'w', 'c', 'k')
  if tonumber(g[1]) == m.start then
    m.count = tonumber(g[2]) or 0
    m.credits = tonumber(g[3]) or 0
  end
  m.limit = tonumber(per_month) + m.credits
  return m
end

-- Adds units taken and credits to a month; a month the hash does not hold yet starts afresh and
-- expires at its end (plus a second's slack), so credits end with their month.
local function add_to_month(mkey, m, now, count, credits)
  if m.count == 0 and m.credits == 0 then
    -- bt: when this month's count began here (give_back: a lease taken before gives nothing back to it).
    redis.call('HSET', mkey, 'w', m.start, 'c', count, 'k', credits, 'bt', now)
    redis.call('PEXPIRE', mkey, m.stop - now + ${EXPIRY_SLACK_MS})
  else
    if count ~= 0 then redis.call('HINCRBY', mkey, 'c', count) end
    if credits ~= 0 then redis.call('HINCRBY', mkey, 'k', credits) end
  end
  m.count = m.count + count
  m.credits = m.credits + credits
end

-- Whether a holder's minute (per_minute nil: no limit), day (likewise) and month each have room for cost units.
local function has_room(w, m, cost, per_minute, per_day)
  return (not per_minute or w.mc + cost <= per_minute) and (not per_day or w.dc + cost <= per_day)
    and (not m.limit or m.count + cost <= m.limit)
end

-- Takes cost units of a holder's minute and day: a fixed minute in its hash, a sliding one in its log
-- (nil: a consumer without perMinute, whose minute counts nothing). A hash entering a new day expires
-- ttl ms from now, and a fixed one notes when (bt): a new hash (as after Redis lost its data) or a
-- new day holds no unit counted before, so a lease taken before gives nothing back to it (give_back).
local function admit_windows(hash, sliding, log, w, now, cost, ttl)
  local day = math.floor(now / 86400000)
  if not sliding then
    w.mc = w.mc + cost
    w.dc = w.dc + cost
    if w.same_day then
      redis.call('HSET', hash, 'mw', math.floor(now / 60000), 'mc', w.mc, 'dw', day, 'dc', w.dc)
    else
      redis.call('HSET', hash, 'mw', math.floor(now / 60000), 'mc', w.mc, 'dw', day, 'dc', w.dc, 'bt', now)
    end
  else
    if log then
      for i = 1, cost do
        redis.call('ZADD', log, now, now .. '-' .. (w.dc + i))
      end
      redis.call('PEXPIRE', log, 61000)
      w.mc = w.mc + cost
    end
    w.dc = w.dc + cost
    redis.call('HSET', hash, 'dw', day, 'dc', w.dc)
  end
  if not w.same_day then redis.call('PEXPIRE', hash, ttl) end
end

-- A refused cost of several units in a sliding minute: w.reset becomes when enough admissions leave it.
local function sliding_freeing(log, w, cost, per_minute)
  if not log or not per_minute or cost <= 1 or w.mc <= 0 then return end
  local nth = math.max(1, w.mc + cost - per_minute)
  local at = redis.call('ZRANGE', log, nth - 1, nth - 1, 'WITHSCORES')[2]
  if at then w.reset = tonumber(at) + 60000 end
end

-- A refusal counted toward the key's ban (rc, re: what its hash held): banned past the threshold.
-- Answers the outcome (1 refused, 3 refused and banned now) and the ban's end (0 for none).
local function count_refusal(hash, now, rc, re, ttl, threshold, window_ms, duration_ms)
  local count = 1
  local ends = tonumber(re) or 0
  if ends > now then
    count = (tonumber(rc) or 0) + 1
  else
    ends = now + window_ms
  end
  if count > threshold then
    local banned_until = now + duration_ms
    redis.call('HSET', hash, 'bu', banned_until)
    redis.call('HDEL', hash, 'rc', 're')
    redis.call('PEXPIRE', hash, ttl)
    return 3, banned_until
  end
  redis.call('HSET', hash, 'rc', count, 're', ends)
  redis.call('PEXPIRE', hash, ttl)
  return 1, 0
end

-- Removes the leases a consume carries (args from \`from\` on: requests that ended in this process).
local function release_leases(ifkey, args, from)
  if #args >= from then redis.call('ZREM', ifkey, unpack(args, from)) end
end

-- Whether the key's maxInFlight (nil: none) leaves a slot, and the leases its set holds. A full set
-- first drops its expired leases (an instance that died before releasing).
local function lease_room(ifkey, now, max)
  if not max then return true, 0 end
  local held = redis.call('ZCARD', ifkey)
  if held >= max then
    redis.call('ZREMRANGEBYSCORE', ifkey, '-inf', now)
    held = redis.call('ZCARD', ifkey)
    if held >= max then return false, held end
  end
  return true, held
end

-- Takes the request's lease until released or expired (the set expires with its last lease); answers
-- the leases the set holds with it (held plus what ZADD added), 0 without maxInFlight.
local function hold_lease(ifkey, now, max, held, id, ttl)
  if not max then return 0 end
  local count = held + redis.call('ZADD', ifkey, now + ttl, id)
  redis.call('PEXPIRE', ifkey, ttl)
  return count
end

-- The one reply of every script that answers windows (decision-reply.ts): the outcome, now, the ban's
-- end, the leases held, the key's windows and month, then (c given) the consumer's.
local function decision_reply(outcome, now, banned_until, held, k, km, c, cm)
  local r = {outcome, now, banned_until, held, k.mc, k.dc, k.reset, km.count, km.credits, km.start, km.stop}
  if c then
    for _, v in ipairs({c.mc, c.dc, c.reset, cm.count, cm.credits, cm.start, cm.stop}) do r[#r + 1] = v end
  end
  return r
end
`;

/**
 * The locals a script's KEYS are bound to: a key's hash, sliding log, month hash and leases, and its
 * consumer's hash, log and month hash.
 */
export type KeySlot = 'hash' | 'log' | 'mkey' | 'ifkey' | 'chash' | 'clog' | 'cmkey';

/** A script of the model: the fragments, its KEYS bound to `keys` (in that order), then `body`. */
export function luaScript(keys: readonly KeySlot[], body: string): string {
  const bind = `local ${keys.join(', ')} = ${keys.map((_, i) => `KEYS[${i + 1}]`).join(', ')}`;
  return `${LUA_FUNCTIONS}\n${bind}\n${body}`;
}

/** The KEYS of a call, in the order `slots` names them (the same list as the script's luaScript). */
export function scriptKeys(
  slots: readonly KeySlot[],
  key: KeyRedisNames | ConsumerRedisNames | null,
  consumer?: ConsumerRedisNames,
): string[] {
  return slots.map((slot) => {
    const name = slotName(slot, key, consumer);
    if (name === undefined) throw new Error(`no Redis key for the script's ${slot}`);
    return name;
  });
}

function slotName(
  slot: KeySlot,
  key: KeyRedisNames | ConsumerRedisNames | null,
  consumer: ConsumerRedisNames | undefined,
): string | undefined {
  switch (slot) {
    case 'hash':
      return key?.hash;
    case 'log':
      return key?.log;
    case 'mkey':
      return key?.month;
    case 'ifkey':
      return key !== null && 'leases' in key ? key.leases : undefined;
    case 'chash':
      return consumer?.hash;
    case 'clog':
      return consumer?.log;
    case 'cmkey':
      return consumer?.month;
  }
}
