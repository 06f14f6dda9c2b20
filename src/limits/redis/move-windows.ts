import type { RedisClient } from '../../shared/redis/redis';
import { defineLuaScript, type LuaCaller } from '../../shared/redis/lua-script';
import type { KeyRedisNames } from './redis-names';

/**
 * Moves a key's windows into another place (redis-names.ts), adding to what is there. KEYS: 1 the
 * target hash, 2 its month hash, 3 its log. ARGV: 1 the source hash as flat field/value pairs
 * joined by ',', 2 the source month's w, c, k, pttl, rs, bt joined by ',' ('' for none; rs '0' and
 * bt '' for none), then the log's score, member pairs. Windows of the same index add up; a later one wins;
 * the later ban end wins. The ledger of units out in leases (lease-scripts.ts: lb0, lu0, lb1, lu1)
 * merges as the windows do, slot by slot: the same bucket adds up, a later bucket wins (an older
 * one has ended). The later reset mark (rs) wins, the hash's and the month's: a reset at the new
 * place then counts the leases other instances took of the key at the old one. The earlier mark of
 * when counting began (bt) wins, and a place without one leaves none (began).
 */
const MOVE_WINDOWS_LUA = `
local function split(s)
  local out = {}
  for part in string.gmatch(s, '[^,]+') do table.insert(out, part) end
  return out
end
local fresh_hash = redis.call('EXISTS', KEYS[1]) == 0
local fresh_month = redis.call('EXISTS', KEYS[2]) == 0
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
-- bt, when a hash began counting (lua-model.ts): units moved in began where they came from, so the
-- earlier mark stands; a hash the move made takes the source's, and none where either had none.
local function began(key, fresh, value)
  local here = tonumber(redis.call('HGET', key, 'bt'))
  if fresh and value then
    redis.call('HSET', key, 'bt', value)
  elseif not value or not here then
    redis.call('HDEL', key, 'bt')
  elseif value < here then
    redis.call('HSET', key, 'bt', value)
  end
end
local function later(key, field, value)
  if not value or value <= 0 then return end
  if value > (tonumber(redis.call('HGET', key, field)) or 0) then redis.call('HSET', key, field, value) end
end
merge('mw', 'mc')
merge('dw', 'dc')
merge('lb0', 'lu0')
merge('lb1', 'lu1')
later(KEYS[1], 'bu', src['bu'])
later(KEYS[1], 'rs', src['rs'])
if next(src) ~= nil then began(KEYS[1], fresh_hash, src['bt']) end
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
  later(KEYS[2], 'rs', tonumber(m[5]))
  began(KEYS[2], fresh_month, tonumber(m[6]))
  if tonumber(m[4]) > 0 then redis.call('PEXPIRE', KEYS[2], tonumber(m[4])) end
end
for i = 3, #ARGV, 2 do redis.call('ZADD', KEYS[3], ARGV[i], ARGV[i + 1]) end
if #ARGV > 2 then redis.call('PEXPIRE', KEYS[3], 61000) end
return 1
`;

const MOVE = defineLuaScript<number>('asgKeyWindowsMove', MOVE_WINDOWS_LUA, 3);

/** A key's windows moved between the places of two consumers (or none): KeyLimiter.moveWindows in Redis. */
export class RedisWindowsMove {
  private readonly script: LuaCaller<number>;

  constructor(private readonly redis: RedisClient) {
    this.script = MOVE.on(redis);
  }

  /**
   * Copies the windows under `from` into `to` (adding), then deletes `from`. Two places in two slots
   * on a Cluster: a read, a script at the target, a delete; a request counted at `from` in between
   * is carried by the second move the caller makes a little later (consumer-moves.ts).
   */
  async move(from: KeyRedisNames, to: KeyRedisNames): Promise<void> {
    const replies = await this.redis
      .multi()
      .hgetall(from.hash)
      .pttl(from.hash)
      .hgetall(from.month)
      .pttl(from.month)
      .zrange(from.log, '0', '-1', 'WITHSCORES')
      .exec();
    if (!replies) return;
    const [hash, hashTtl, month, monthTtl, log] = replies.map(([err, value]) => {
      if (err) throw err;
      return value;
    }) as [Record<string, string>, number, Record<string, string>, number, string[]];
    const fields = Object.entries(hash).flatMap(([k, v]) => [k, v]);
    if (hashTtl > 0) fields.push('pttl', String(hashTtl));
    const monthArg =
      month.w === undefined
        ? ''
        : [
            month.w,
            month.c ?? '0',
            month.k ?? '0',
            String(Math.max(monthTtl, 0)),
            month.rs ?? '0',
            month.bt ?? '',
          ].join(',');
    const logPairs: string[] = [];
    for (let i = 0; i < log.length; i += 2) logPairs.push(log[i + 1]!, 'moved-' + log[i]!);
    if (fields.length === 0 && monthArg === '' && logPairs.length === 0) return;
    await this.script([to.hash, to.month, to.log], [fields.join(','), monthArg, ...logPairs]);
    await this.redis.del(from.hash);
    await this.redis.del(from.month);
    await this.redis.del(from.log);
  }
}
