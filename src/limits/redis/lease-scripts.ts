import { defineLuaScript } from '../../shared/redis/lua-script';
import { LEASE_LIFE_MS, LEASE_SHARE_DIVISOR } from '../leases/lease-settings';
import type { LeaseGrant, LeaseReturn, LeaseWindow } from '../leases/lease';
import type { KeyDecision, RefusingWindow, WindowState } from '../types';
import { luaScript, type KeySlot } from './lua-model';

/**
 * The buckets of a holder's ledger of units out in leases (LEASE_FUNCTIONS): twice a lease's life, so
 * the leases alive at any moment expire in at most two consecutive buckets.
 */
export const LEASE_LEDGER_BUCKET_MS = 2 * LEASE_LIFE_MS;

/**
 * The Lua of leases of units (docs/scaling.md "Leases"), in the Lua model (lua-model.ts): the
 * fragments a lease consume and a return call, the lease consume's extra ARGV and reply, and the
 * return alone. The lease consume itself is the model's consume with its `lease` variant
 * (decision-scripts.ts): the carried return given back first, then the request decided as any
 * consume, then the lease's units counted with the request's in every window it counts in.
 */
export const LEASE_FUNCTIONS = `
-- A lease's units (leases/lease-size.ts grantedLeaseUnits): at most 1/${LEASE_SHARE_DIVISOR} of the least any window
-- has left after the request (left: a list), in whole requests of cost; 0 below two requests.
local function lease_units(wanted, cost, left)
  if not wanted or wanted <= 0 or #left == 0 then return 0 end
  local tightest = left[1]
  for i = 2, #left do
    if left[i] < tightest then tightest = left[i] end
  end
  local cap = math.floor(math.max(0, tightest) / ${LEASE_SHARE_DIVISOR})
  local requests = math.floor(math.min(wanted, cap) / cost)
  if requests < 2 then return 0 end
  return requests * cost
end

-- What a holder's windows with a limit (nil: none) have left after cost more units, added to list t.
local function units_left(t, w, m, cost, per_minute, per_day)
  if per_minute then t[#t + 1] = per_minute - w.mc - cost end
  if per_day then t[#t + 1] = per_day - w.dc - cost end
  if m.limit then t[#t + 1] = m.limit - m.count - cost end
  return t
end

-- The ledger of a holder's units out in leases, in its windows hash: lb0, lu0, lb1, lu1, the units of
-- the leases whose expiry (taken + ${LEASE_LIFE_MS} ms, Redis's clock) falls in a bucket of ${LEASE_LEDGER_BUCKET_MS} ms, one slot per
-- bucket parity. The leases alive at any moment expire in at most two consecutive buckets, so a slot
-- is written over only when every lease in it has ended. A window reset counts what the live
-- buckets hold (leased_out): a lease another instance took before the reset is counted in the
-- restarted windows, so none admits more than its limit.
local function ledger_bucket(taken_at)
  local bucket = math.floor((taken_at + ${LEASE_LIFE_MS}) / ${LEASE_LEDGER_BUCKET_MS})
  return bucket, tostring(bucket % 2)
end

-- Records a lease of units taken at now.
local function ledger_add(hash, now, units)
  local bucket, p = ledger_bucket(now)
  if tonumber(redis.call('HGET', hash, 'lb' .. p)) == bucket then
    redis.call('HINCRBY', hash, 'lu' .. p, units)
  else
    redis.call('HSET', hash, 'lb' .. p, bucket, 'lu' .. p, units)
  end
end

-- Takes an ended lease's units off the ledger (a slot written over since holds none of them).
local function ledger_remove(hash, taken_at, units)
  local bucket, p = ledger_bucket(taken_at)
  local f = redis.call('HMGET', hash, 'lb' .. p, 'lu' .. p)
  if tonumber(f[1]) == bucket and (tonumber(f[2]) or 0) > 0 then
    redis.call('HSET', hash, 'lu' .. p, math.max(0, tonumber(f[2]) - units))
  end
end

-- The units of leases that may still be alive at now: every slot whose bucket has not ended.
local function leased_out(hash, now)
  local f = redis.call('HMGET', hash, 'lb0', 'lu0', 'lb1', 'lu1')
  local current, out = math.floor(now / ${LEASE_LEDGER_BUCKET_MS}), 0
  for i = 1, 3, 2 do
    if (tonumber(f[i]) or -1) >= current then out = out + (tonumber(f[i + 1]) or 0) end
  end
  return out
end

-- Whether a window reset at rs (nil: none) left a lease taken at taken_at out of what it restarted: a
-- reset since the lease was taken that did not count it (its bucket had ended: leased_out).
local function reset_without(rs, taken_at)
  rs = tonumber(rs)
  if not rs or rs < taken_at then return false end
  return ledger_bucket(taken_at) < math.floor(rs / ${LEASE_LEDGER_BUCKET_MS})
end

-- Whether a hash began counting (bt, lua-model.ts admit_windows and add_to_month) after a lease was
-- taken at taken_at: none of the lease's units are in it (Redis lost its data since, say).
local function born_after(bt, taken_at)
  bt = tonumber(bt)
  return bt ~= nil and bt > taken_at
end

-- Gives a lease's unused units back to a holder's fixed minute, day and month, each named by the
-- start it counted them in ('' for none): only to a window still that one, holding them, not begun
-- after the lease was taken (born_after), and not reset since the lease was taken (taken_at; a reset
-- writes rs, its time) without counting the lease's units again (reset_without); the lease's granted
-- units leave the ledger. Answers the windows named that did not take them.
local function give_back(hash, mkey, units, minute_start, day_start, month_start, taken_at, granted)
  local missed = 0
  ledger_remove(hash, taken_at, granted)
  local f = redis.call('HMGET', hash, 'mw', 'mc', 'dw', 'dc', 'rs', 'bt')
  local reset = reset_without(f[5], taken_at) or born_after(f[6], taken_at)
  for i, start in ipairs({minute_start, day_start}) do
    if start ~= '' then
      local index, count, length = tonumber(f[2 * i - 1]), tonumber(f[2 * i]) or 0, i == 1 and 60000 or 86400000
      if not reset and index and index * length == tonumber(start) and count >= units then
        redis.call('HINCRBY', hash, i == 1 and 'mc' or 'dc', -units)
      else
        missed = missed + 1
      end
    end
  end
  if month_start ~= '' then
    local g = redis.call('HMGET', mkey, 'w', 'c', 'rs', 'bt')
    local month_reset = reset_without(g[3], taken_at) or born_after(g[4], taken_at)
    if not month_reset and tonumber(g[1]) == tonumber(month_start) and (tonumber(g[2]) or 0) >= units then
      redis.call('HINCRBY', mkey, 'c', -units)
    else
      missed = missed + 1
    end
  end
  return missed
end
`;

/**
 * ARGV a lease consume adds after the consume's own (from `at`, releasesAt of the plain variant):
 * at the units wanted ('0': none), at+1 the carried return's units ('0': none), at+2..at+7 the
 * starts of the windows it goes back to (minute, day, month, the consumer's minute, day, month; ''
 * for a window it does not go back to), at+8 when its lease was taken (store ms), at+9 the units it
 * took (what leaves the ledger). The carried in-flight releases follow.
 */
export const LEASE_ARGV_FIELDS = 10;

const RETURN_ORDER: readonly RefusingWindow[] = [
  'minute',
  'day',
  'month',
  'consumer-minute',
  'consumer-day',
  'consumer-month',
];

/** The return's units and window starts, as the lease consume and the return script take them. */
export function returnArgv(ended: LeaseReturn | null): string[] {
  if (ended === null) return ['0', '', '', '', '', '', '', '0', '0'];
  return [
    String(ended.units),
    ...RETURN_ORDER.map((name) => {
      const window = ended.windows.find((w) => w.name === name);
      return window === undefined ? '' : String(window.startAt);
    }),
    String(ended.takenAt),
    String(ended.granted),
  ];
}

/** The lease consume's ARGV tail. */
export function leaseArgv(wanted: number, ended: LeaseReturn | null): string[] {
  return [String(wanted), ...returnArgv(ended)];
}

/**
 * Lines of the lease consume, by where they go in the model's consume (decision-scripts.ts):
 * `start` after the clock is read (the return, and `lease_reply`: every reply with the units granted
 * and the return's missed windows added); `take` in the admission, before any window counts, sets
 * `taken` (the request's cost plus the lease's). `at` is the first lease ARGV.
 */
export function leaseConsumeLua(at: number, consumer: boolean) {
  const r = (i: number) => `ARGV[${at + i}]`;
  const consumerBack = consumer
    ? `\n  missed = missed + give_back(chash, cmkey, back, ${r(5)}, ${r(6)}, ${r(7)}, tonumber(${r(8)}), tonumber(${r(9)}))`
    : '';
  const consumerLeft = consumer ? `\n  units_left(left, c, cm, cost, tonumber(ARGV[18]), tonumber(ARGV[19]))` : '';
  const consumerLedger = consumer ? `\n    ledger_add(chash, now, granted)` : '';
  return {
    start: `local granted, missed = 0, 0
local back = tonumber(${r(1)})
if back > 0 or tonumber(${r(9)}) > 0 then
  missed = give_back(hash, mkey, back, ${r(2)}, ${r(3)}, ${r(4)}, tonumber(${r(8)}), tonumber(${r(9)}))${consumerBack}
end
local function lease_reply(...)
  local reply = decision_reply(...)
  reply[#reply + 1] = granted
  reply[#reply + 1] = missed
  return reply
end`,
    take: `local left = units_left({}, k, km, cost, tonumber(ARGV[1]), tonumber(ARGV[2]))${consumerLeft}
  granted = lease_units(tonumber(${r(0)}), cost, left)
  if granted > 0 then
    ledger_add(hash, now, granted)${consumerLedger}
  end
  local taken = cost + granted`,
  };
}

/**
 * A return alone (a lease ended by expiry with no next request): KEYS the key's hash and month hash,
 * with a consumer its hash and month hash; ARGV returnArgv's. Reply: the windows that did not take it.
 */
function returnLua(consumer: boolean): string {
  const own = `local missed = give_back(hash, mkey, tonumber(ARGV[1]), ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[8]), tonumber(ARGV[9]))`;
  const shared = consumer
    ? `\nmissed = missed + give_back(chash, cmkey, tonumber(ARGV[1]), ARGV[5], ARGV[6], ARGV[7], tonumber(ARGV[8]), tonumber(ARGV[9]))`
    : '';
  return `${LEASE_FUNCTIONS}\n${own}${shared}\nreturn missed\n`;
}

const RETURN_KEYS: readonly [readonly KeySlot[], readonly KeySlot[]] = [
  ['hash', 'mkey'],
  ['hash', 'mkey', 'chash', 'cmkey'],
];

/** The two returns alone: [a key of no consumer, a consumer's key]. */
export const RETURN_SCRIPTS = RETURN_KEYS.map((keys, i) => ({
  script: defineLuaScript<number>(
    i === 0 ? 'asgKeyLeaseReturn' : 'asgConsumerLeaseReturn',
    luaScript(keys, returnLua(i === 1)),
    keys.length,
  ),
  keys,
}));

/** The lease consume's reply ends with the units granted and the return's missed windows. */
export function leaseTail(reply: readonly number[]): { granted: number; missed: number } {
  return { granted: reply[reply.length - 2]!, missed: reply[reply.length - 1]! };
}

/**
 * The grant of an admitted decision whose windows include `units` leased: each window with a limit,
 * its start (a fixed minute's and the day's from their end; the month's its own) and what it has
 * left after the request and the lease.
 */
export function leaseGrantOf(decision: KeyDecision, units: number): LeaseGrant | null {
  if (decision.outcome !== 'allowed' || units <= 0) return null;
  const windows: LeaseWindow[] = [
    windowOf('minute', decision.minute, decision.minute.resetAt - 60_000),
    windowOf('day', decision.day, decision.day.resetAt - 86_400_000),
  ];
  if (decision.month) windows.push(windowOf('month', decision.month, decision.month.startAt));
  const c = decision.consumer;
  if (c?.minute) windows.push(windowOf('consumer-minute', c.minute, c.minute.resetAt - 60_000));
  if (c?.day) windows.push(windowOf('consumer-day', c.day, c.day.resetAt - 86_400_000));
  if (c?.month) windows.push(windowOf('consumer-month', c.month, c.month.startAt));
  return { units, windows, storeNow: decision.now };
}

function windowOf(name: RefusingWindow, state: WindowState, startAt: number): LeaseWindow {
  return { name, limit: state.limit, remaining: state.remaining, startAt, resetAt: state.resetAt };
}
