import type { RedisClient } from '../../shared/redis';
import { DAY_MS, USAGE_HISTORY_DAYS, type DayUsage, type KeyActivityStore, type KeyTally } from './key-activity';

/**
 * Adds one key's counts of one UTC day to its usage hash and drops the days that fell out of the
 * history. The hash outlives its last flush by 91 days, so a key used at least that often keeps it
 * for good, and dropping a fixed few days per flush would leave behind the days of a key used at
 * longer intervals. Instead, whenever the history has moved on since the hash was last pruned (field
 * `pruned`: the day it was cleared through), the script reads the hash and drops every day up to the
 * new one, whatever the gap. That is once a day per key; the day's other flushes cost one HGET.
 * KEYS: 1 the usage hash. ARGV: 1 day, 2 days kept, 3 admitted, 4 rate-limited, 5 banned, 6 TTL ms.
 */
const ADD_USAGE_LUA = `
local key = KEYS[1]
local day = tonumber(ARGV[1])
local through = day - tonumber(ARGV[2])
for i, outcome in ipairs({'a', 'r', 'b'}) do
  local count = tonumber(ARGV[2 + i])
  if count > 0 then redis.call('HINCRBY', key, day .. ':' .. outcome, count) end
end
local pruned = tonumber(redis.call('HGET', key, 'pruned'))
if pruned == nil or pruned < through then
  local fields = redis.call('HGETALL', key)
  for i = 1, #fields, 2 do
    local fieldDay = tonumber(string.match(fields[i], '^(%d+):'))
    if fieldDay and fieldDay <= through then redis.call('HDEL', key, fields[i]) end
  end
  redis.call('HSET', key, 'pruned', through)
end
redis.call('PEXPIRE', key, ARGV[6])
return 1`;

const ADD_USAGE_COMMAND = 'asgKeyUsageAdd';

interface KeyUsageCommands {
  [ADD_USAGE_COMMAND](key: string, ...argv: string[]): Promise<number>;
}

/**
 * Redis layout:
 *   <ns>:key-usage:{<key id>}   HASH  `<day>:a|r|b` → count (HINCRBY, so instances add up exactly),
 *                                     `pruned` → the day the history was cleared through; expires
 *                                     91 days after its last flush; one hash tag per key keeps a
 *                                     key's flush on one Cluster slot
 *   <ns>:keys:{k}:last-used     ZSET  key id → epoch ms of the latest admitted request (ZADD GT)
 */
export class RedisKeyActivityStore implements KeyActivityStore {
  private readonly commands: KeyUsageCommands;

  constructor(
    private readonly redis: RedisClient,
    private readonly namespace: string,
  ) {
    redis.defineCommand(ADD_USAGE_COMMAND, { numberOfKeys: 1, lua: ADD_USAGE_LUA });
    this.commands = redis as unknown as KeyUsageCommands;
  }

  private usageKey(keyId: string): string {
    return `${this.namespace}:key-usage:{${keyId}}`;
  }

  private get lastUsedKey(): string {
    return `${this.namespace}:keys:{k}:last-used`;
  }

  async add(day: number, tallies: ReadonlyMap<string, KeyTally>): Promise<void> {
    const writes: Array<Promise<unknown>> = [];
    const lastUses: Array<string | number> = [];
    const kept = String(USAGE_HISTORY_DAYS);
    const ttl = String((USAGE_HISTORY_DAYS + 1) * DAY_MS);
    for (const [keyId, tally] of tallies) {
      const counts = [String(tally.admitted), String(tally.rateLimited), String(tally.banned)];
      writes.push(this.commands[ADD_USAGE_COMMAND](this.usageKey(keyId), String(day), kept, ...counts, ttl));
      if (tally.lastUsedAt > 0) lastUses.push(tally.lastUsedAt, keyId);
    }
    if (lastUses.length > 0) writes.push(this.redis.zadd(this.lastUsedKey, 'GT', ...lastUses));
    const results = await Promise.allSettled(writes);
    const failed = results.find((r) => r.status === 'rejected');
    if (failed) throw (failed as PromiseRejectedResult).reason;
  }

  async days(keyId: string, firstDay: number, lastDay: number): Promise<Array<Omit<DayUsage, 'date'>>> {
    const fields: string[] = [];
    for (let day = firstDay; day <= lastDay; day++) fields.push(`${day}:a`, `${day}:r`, `${day}:b`);
    const values = await this.redis.hmget(this.usageKey(keyId), ...fields);
    const result: Array<Omit<DayUsage, 'date'>> = [];
    for (let i = 0; i < values.length; i += 3) {
      result.push({ admitted: Number(values[i] ?? 0), rateLimited: Number(values[i + 1] ?? 0), banned: Number(values[i + 2] ?? 0) });
    }
    return result;
  }

  async lastUsed(keyIds: readonly string[]): Promise<Map<string, number>> {
    const result = new Map<string, number>();
    if (keyIds.length === 0) return result;
    const scores = await this.redis.zmscore(this.lastUsedKey, ...keyIds);
    keyIds.forEach((id, i) => {
      const score = scores[i];
      if (score !== null && score !== undefined) result.set(id, Number(score));
    });
    return result;
  }
}
