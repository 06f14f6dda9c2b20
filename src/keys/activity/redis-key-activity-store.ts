import { defineLuaScript, type LuaCaller } from '../../shared/lua-script';
import type { RedisClient } from '../../shared/redis';
import { DAY_MS, USAGE_EXPORT_DAYS, USAGE_HISTORY_DAYS, type DayUsage, type KeyActivityStore, type KeyTally, type UsageDay } from './key-activity';

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
local a, r, b, u, w = 0, 0, 0, 0, 0
local stored = redis.call('HGET', KEYS[2], ARGV[1])
if stored then
  local fa, fr, fb, fu, fw = string.match(stored, '^(%d+) (%d+) (%d+) (%d+) (%d+)$')
  a, r, b, u, w = tonumber(fa), tonumber(fr), tonumber(fb), tonumber(fu), tonumber(fw)
end
a = a + tonumber(ARGV[3])
r = r + tonumber(ARGV[4])
b = b + tonumber(ARGV[5])
u = u + tonumber(ARGV[7])
w = math.max(w, tonumber(ARGV[8]))
redis.call('HSET', KEYS[2], ARGV[1], string.format('%d %d %d %d %d', a, r, b, u, w))
redis.call('PEXPIRE', KEYS[2], ARGV[9])
return 1`;

// KEYS: the key's usage hash, its month's ledger.
const ADD_USAGE = defineLuaScript<number>('asgKeyUsageAdd', ADD_USAGE_LUA, 2);

/** Ids a ZMSCORE of the last-used times reads at once. */
const LAST_USED_STEP = 1000;

/**
 * Redis layout:
 *   <ns>:key-usage:{<key id>}   HASH  `<day>:a|r|b` → count (HINCRBY, so instances add up exactly),
 *                                     `pruned` → the day the history was cleared through; expires
 *                                     91 days after its last flush; one hash tag per key keeps a
 *                                     key's flush on one Cluster slot
 *   <ns>:key-usage:{<key id>}:<yyyy-mm>  HASH  the month's ledger for the usage export: `<day>` →
 *                                     `admitted rateLimited banned units dayCount`; expires 400 days
 *                                     after the month ends
 *   <ns>:keys:{k}:last-used     ZSET  key id → epoch ms of the latest admitted request (ZADD GT)
 */
export class RedisKeyActivityStore implements KeyActivityStore {
  private readonly addUsage: LuaCaller<number>;

  constructor(
    private readonly redis: RedisClient,
    private readonly namespace: string,
  ) {
    this.addUsage = ADD_USAGE.on(redis);
  }

  private usageKey(keyId: string): string {
    return `${this.namespace}:key-usage:{${keyId}}`;
  }

  /** The key's ledger of the UTC month holding `day` (same hash tag as its usage hash: one slot). */
  private ledgerKey(keyId: string, day: number): string {
    return `${this.usageKey(keyId)}:${monthOf(day)}`;
  }

  private get lastUsedKey(): string {
    return `${this.namespace}:keys:{k}:last-used`;
  }

  async add(day: number, tallies: ReadonlyMap<string, KeyTally>): Promise<void> {
    const writes: Array<Promise<unknown>> = [];
    const lastUses: Array<string | number> = [];
    const kept = String(USAGE_HISTORY_DAYS);
    const ttl = String((USAGE_HISTORY_DAYS + 1) * DAY_MS);
    const ledgerTtl = String(ledgerTtlMs(day));
    for (const [keyId, tally] of tallies) {
      const counts = [String(tally.admitted), String(tally.rateLimited), String(tally.banned)];
      const units = [String(tally.units), String(tally.dayCount), ledgerTtl];
      writes.push(this.addUsage([this.usageKey(keyId), this.ledgerKey(keyId, day)], [String(day), kept, ...counts, ttl, ...units]));
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

  /** ZMSCORE in steps of LAST_USED_STEP ids: a listing of 100,000 keys is not one command holding Redis. */
  async lastUsed(keyIds: readonly string[]): Promise<Map<string, number>> {
    const result = new Map<string, number>();
    for (let at = 0; at < keyIds.length; at += LAST_USED_STEP) {
      const ids = keyIds.slice(at, at + LAST_USED_STEP);
      const scores = await this.redis.zmscore(this.lastUsedKey, ...ids);
      ids.forEach((id, i) => {
        const score = scores[i];
        if (score !== null && score !== undefined) result.set(id, Number(score));
      });
    }
    return result;
  }

  /** Every ledger month of each key in the range, read at once (the client pipelines them per node). */
  async usageDays(keyIds: readonly string[], firstDay: number, lastDay: number): Promise<UsageDay[]> {
    const months = monthsBetween(firstDay, lastDay);
    const ledgers = await Promise.all(keyIds.map((keyId) => Promise.all(months.map((month) => this.redis.hgetall(`${this.usageKey(keyId)}:${month}`)))));
    const result: UsageDay[] = [];
    keyIds.forEach((keyId, k) => {
      const days: UsageDay[] = [];
      for (const ledger of ledgers[k]!) {
        for (const [field, value] of Object.entries(ledger)) {
          const day = Number(field);
          if (day < firstDay || day > lastDay) continue;
          const [admitted, rateLimited, banned, units, dayCount] = value.split(' ').map(Number) as [number, number, number, number, number];
          days.push({ keyId, day, admitted, rateLimited, banned, units, dayCount });
        }
      }
      result.push(...days.sort((a, b) => a.day - b.day));
    });
    return result;
  }
}

/** `2026-03`: the UTC month holding the day. */
function monthOf(day: number): string {
  return new Date(day * DAY_MS).toISOString().slice(0, 7);
}

/** The months (`yyyy-mm`) the days firstDay..lastDay fall in, oldest first. */
function monthsBetween(firstDay: number, lastDay: number): string[] {
  const months: string[] = [];
  const at = new Date(firstDay * DAY_MS);
  at.setUTCDate(1);
  while (at.getTime() <= lastDay * DAY_MS) {
    months.push(at.toISOString().slice(0, 7));
    at.setUTCMonth(at.getUTCMonth() + 1);
  }
  return months;
}

/** A month's ledger lives until USAGE_EXPORT_DAYS after the month ends, counted from the day being written. */
function ledgerTtlMs(day: number): number {
  const start = new Date(day * DAY_MS);
  const nextMonth = Date.UTC(start.getUTCFullYear(), start.getUTCMonth() + 1, 1);
  return nextMonth + USAGE_EXPORT_DAYS * DAY_MS - day * DAY_MS;
}
