import { defineLuaScript, type LuaCaller } from '../shared/redis/lua-script';
import type { RedisClient } from '../shared/redis/redis';
import {
  MAX_KEYS_PER_MINUTE,
  MINUTE_MS,
  TOP_KEYS_KEPT_MINUTES,
  busiestFirst,
  type BusyKey,
  type MinuteTally,
  type TopKeysStore,
} from './top-keys';

/**
 * KEYS 1 the minute's requests, 2 its refusals. ARGV 1 TTL ms, 2 keys kept, then per key: id,
 * requests, refusals. Adds the batch, keeps the busiest keys of the minute, and lets it expire an
 * hour after it.
 */
const ADD_LUA = `
for i = 3, #ARGV, 3 do
  redis.call('ZINCRBY', KEYS[1], ARGV[i + 1], ARGV[i])
  if ARGV[i + 2] ~= '0' then redis.call('ZINCRBY', KEYS[2], ARGV[i + 2], ARGV[i]) end
end
local keep = tonumber(ARGV[2])
for k = 1, 2 do
  if redis.call('ZCARD', KEYS[k]) > keep then redis.call('ZREMRANGEBYRANK', KEYS[k], 0, -(keep + 1)) end
  redis.call('PEXPIRE', KEYS[k], ARGV[1])
end
return 1`;

/**
 * KEYS 1 and 2 scratch sets (made and deleted by this script, so nothing is left behind), then the
 * span's request sets, then its refusal sets. ARGV 1 minutes, 2 limit. Reply: id, requests,
 * refusals, … busiest first.
 */
const TOP_LUA = `
local n = tonumber(ARGV[1])
redis.call('ZUNIONSTORE', KEYS[1], n, unpack(KEYS, 3, 2 + n))
redis.call('ZUNIONSTORE', KEYS[2], n, unpack(KEYS, 3 + n, 2 + 2 * n))
local top = redis.call('ZREVRANGE', KEYS[1], 0, tonumber(ARGV[2]) - 1, 'WITHSCORES')
local reply = {}
for i = 1, #top, 2 do
  table.insert(reply, top[i])
  table.insert(reply, top[i + 1])
  table.insert(reply, redis.call('ZSCORE', KEYS[2], top[i]) or '0')
end
redis.call('DEL', KEYS[1], KEYS[2])
return reply`;

const ADD = defineLuaScript<number>('asgTopKeysAdd', ADD_LUA, 2);
// The number of keys varies with the span: given per call.
const TOP = defineLuaScript<string[]>('asgTopKeys', TOP_LUA);

/**
 * Redis layout (one hash tag, so every script stays on one Cluster slot):
 *   <ns>:top-keys:{t}:<minute>           ZSET  key id → requests in that minute (minutes since the epoch)
 *   <ns>:top-keys:{t}:<minute>:limited   ZSET  key id → requests refused with 429 in that minute
 * Each holds the minute's MAX_KEYS_PER_MINUTE busiest keys and expires an hour after its minute.
 * Every instance adds its batch every few seconds: one script call per minute in the batch.
 */
export class RedisTopKeysStore implements TopKeysStore {
  private readonly scripts: { add: LuaCaller<number>; top: LuaCaller<string[]> };
  private readonly prefix: string;

  constructor(redis: RedisClient, namespace: string) {
    this.prefix = `${namespace}:top-keys:{t}:`;
    this.scripts = { add: ADD.on(redis), top: TOP.on(redis) };
  }

  async add(minute: number, tallies: ReadonlyMap<string, MinuteTally>): Promise<void> {
    const argv = [String(TOP_KEYS_KEPT_MINUTES * MINUTE_MS), String(MAX_KEYS_PER_MINUTE)];
    for (const [keyId, tally] of tallies) argv.push(keyId, String(tally.requests), String(tally.rateLimited));
    await this.scripts.add([this.prefix + minute, `${this.prefix}${minute}:limited`], argv);
  }

  async top(firstMinute: number, lastMinute: number, limit: number): Promise<BusyKey[]> {
    const minutes: number[] = [];
    for (let minute = firstMinute; minute <= lastMinute; minute++) minutes.push(minute);
    const keys = [
      `${this.prefix}union`,
      `${this.prefix}union:limited`,
      ...minutes.map((m) => this.prefix + m),
      ...minutes.map((m) => `${this.prefix}${m}:limited`),
    ];
    const reply = await this.scripts.top(keys, [String(minutes.length), String(limit)]);
    const busy: BusyKey[] = [];
    for (let i = 0; i < reply.length; i += 3)
      busy.push({ keyId: reply[i]!, requests: Number(reply[i + 1]), rateLimited: Number(reply[i + 2]) });
    return busy.sort(busiestFirst);
  }
}
