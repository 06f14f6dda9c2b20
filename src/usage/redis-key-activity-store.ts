import { defineLuaScript, type LuaCaller } from '../shared/redis/lua-script';
import type { RedisClient } from '../shared/redis/redis';
import { systemClock, type Clock } from '../shared/clock';
import {
  PERIOD_DAYS_KEPT,
  parseTouchedMember,
  touchedMember,
  type TouchedKeyDay,
  type UsagePeriodLedger,
} from './events/period-ledger';
import {
  DAY_MS,
  USAGE_EXPORT_DAYS,
  USAGE_HISTORY_DAYS,
  type DayUsage,
  type KeyActivityStore,
  type KeyTally,
  type PeriodTally,
  type UsageDay,
} from './key-activity';

/**
 * Adds one key's counts of one UTC day to its usage hash and drops the days that fell out of the
 * history. The hash outlives its last flush by 91 days, so a key used at least that often keeps it
 * for good, and dropping a fixed few days per flush would leave behind the days of a key used at
 * longer intervals. Instead, whenever the history has moved on since the hash was last pruned (field
 * `pruned`: the day it was cleared through), the script reads the hash and drops every day up to the
 * new one, whatever the gap. That is once a day per key; the day's other flushes cost one HGET.
 * KEYS: 1 the usage hash, 2 the month's ledger, 3 the day's usage-event periods. ARGV: 1 day, 2 days
 * kept, 3 admitted, 4 rate-limited, 5 banned, 6 TTL ms, 7 units, 8 day count, 9 ledger TTL ms,
 * 10 periods' TTL ms, then per period: start, units, day count, admitted, refused.
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
for i = 11, #ARGV, 5 do
  local pu, pw, pa, pr = 0, 0, 0, 0
  local held = redis.call('HGET', KEYS[3], ARGV[i])
  if held then
    local hu, hw, ha, hr = string.match(held, '^(%d+) (%d+) (%d+) (%d+)$')
    pu, pw, pa, pr = tonumber(hu), tonumber(hw), tonumber(ha), tonumber(hr)
  end
  pu = pu + tonumber(ARGV[i + 1])
  pw = math.max(pw, tonumber(ARGV[i + 2]))
  pa = pa + tonumber(ARGV[i + 3])
  pr = pr + tonumber(ARGV[i + 4])
  redis.call('HSET', KEYS[3], ARGV[i], string.format('%d %d %d %d', pu, pw, pa, pr))
end
if #ARGV >= 11 then redis.call('PEXPIRE', KEYS[3], ARGV[10]) end
return 1`;

// KEYS: the key's usage hash, its month's ledger, its usage-event periods of the day (written only when ARGV has periods).
const ADD_USAGE = defineLuaScript<number>('asgKeyUsageAdd', ADD_USAGE_LUA, 3);

/** KEYS 1 the touched set. ARGV 1 member, 2 the mark read: forgets it unless marked again since. */
const UNTOUCH = defineLuaScript<number>(
  'asgUsagePeriodsUntouch',
  `local mark = redis.call('ZSCORE', KEYS[1], ARGV[1])
if mark and tonumber(mark) <= tonumber(ARGV[2]) then return redis.call('ZREM', KEYS[1], ARGV[1]) end
return 0`,
  1,
);

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
 *   <ns>:key-usage:{<key id>}:p<period ms>:<day>  HASH  usage-event periods (src/usage/events), written by
 *                                     the same script as the ledger: `<period start>` → `units
 *                                     dayCount admitted refused`; expires PERIOD_DAYS_KEPT after its last write
 *   <ns>:usage-events:{touched}  ZSET  `<period ms>:<day>:<key id>` → epoch ms of the latest write of
 *                                     its periods (marked before it): what the closer looks at
 */
export class RedisKeyActivityStore implements KeyActivityStore, UsagePeriodLedger {
  private readonly addUsage: LuaCaller<number>;
  private readonly untouchScript: LuaCaller<number>;

  constructor(
    private readonly redis: RedisClient,
    private readonly namespace: string,
    private readonly clock: Clock = systemClock,
  ) {
    this.addUsage = ADD_USAGE.on(redis);
    this.untouchScript = UNTOUCH.on(redis);
  }

  private periodsKey(keyId: string, periodMs: number, day: number): string {
    return `${this.usageKey(keyId)}:p${periodMs}:${day}`;
  }

  private get touchedKey(): string {
    return `${this.namespace}:usage-events:{touched}`;
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
    await this.markTouched(day, tallies);
    for (const [keyId, tally] of tallies) {
      const counts = [String(tally.admitted), String(tally.rateLimited), String(tally.banned)];
      const units = [String(tally.units), String(tally.dayCount), ledgerTtl];
      const periodMs = tally.periods?.periodMs ?? 0;
      const periods = [String(PERIOD_DAYS_KEPT * DAY_MS)];
      for (const [start, p] of tally.periods?.buckets ?? [])
        periods.push(String(start), String(p.units), String(p.dayCount), String(p.admitted), String(p.refused));
      const keys = [this.usageKey(keyId), this.ledgerKey(keyId, day), this.periodsKey(keyId, periodMs, day)];
      writes.push(this.addUsage(keys, [String(day), kept, ...counts, ttl, ...units, ...periods]));
      if (tally.lastUsedAt > 0) lastUses.push(tally.lastUsedAt, keyId);
    }
    if (lastUses.length > 0) writes.push(this.redis.zadd(this.lastUsedKey, 'GT', ...lastUses));
    const results = await Promise.allSettled(writes);
    const failed = results.find((r) => r.status === 'rejected');
    if (failed) throw (failed as PromiseRejectedResult).reason;
  }

  /**
   * Marks the key-days whose periods this batch writes, before writing them: the closer never
   * forgets a mark younger than its grace, so a write it could miss is always looked at again.
   */
  private async markTouched(day: number, tallies: ReadonlyMap<string, KeyTally>): Promise<void> {
    const marks: Array<string | number> = [];
    const now = this.clock.now();
    for (const [keyId, tally] of tallies)
      if (tally.periods && tally.periods.buckets.size > 0)
        marks.push(now, touchedMember(tally.periods.periodMs, day, keyId));
    if (marks.length > 0) await this.redis.zadd(this.touchedKey, ...marks);
  }

  async touched(max: number): Promise<TouchedKeyDay[]> {
    const reply = await this.redis.zrangebyscore(this.touchedKey, '-inf', '+inf', 'WITHSCORES', 'LIMIT', 0, max);
    const entries: TouchedKeyDay[] = [];
    for (let i = 0; i < reply.length; i += 2) {
      const entry = parseTouchedMember(reply[i]!, Number(reply[i + 1]));
      if (entry) entries.push(entry);
    }
    return entries;
  }

  async untouch(entry: TouchedKeyDay): Promise<void> {
    await this.untouchScript(
      [this.touchedKey],
      [touchedMember(entry.periodMs, entry.day, entry.keyId), String(entry.mark)],
    );
  }

  async periodsOf(keyId: string, periodMs: number, day: number): Promise<Map<number, PeriodTally>> {
    const held = await this.redis.hgetall(this.periodsKey(keyId, periodMs, day));
    const periods = new Map<number, PeriodTally>();
    for (const [start, value] of Object.entries(held)) {
      const [units, dayCount, admitted, refused] = value.split(' ').map(Number) as [number, number, number, number];
      periods.set(Number(start), { units, dayCount, admitted, refused });
    }
    return periods;
  }

  async days(keyId: string, firstDay: number, lastDay: number): Promise<Array<Omit<DayUsage, 'date'>>> {
    const fields: string[] = [];
    for (let day = firstDay; day <= lastDay; day++) fields.push(`${day}:a`, `${day}:r`, `${day}:b`);
    const values = await this.redis.hmget(this.usageKey(keyId), ...fields);
    const result: Array<Omit<DayUsage, 'date'>> = [];
    for (let i = 0; i < values.length; i += 3) {
      result.push({
        admitted: Number(values[i] ?? 0),
        rateLimited: Number(values[i + 1] ?? 0),
        banned: Number(values[i + 2] ?? 0),
      });
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
    const ledgers = await Promise.all(
      keyIds.map((keyId) => Promise.all(months.map((month) => this.redis.hgetall(`${this.usageKey(keyId)}:${month}`)))),
    );
    const result: UsageDay[] = [];
    keyIds.forEach((keyId, k) => {
      const days: UsageDay[] = [];
      for (const ledger of ledgers[k]!) {
        for (const [field, value] of Object.entries(ledger)) {
          const day = Number(field);
          if (day < firstDay || day > lastDay) continue;
          const [admitted, rateLimited, banned, units, dayCount] = value.split(' ').map(Number) as [
            number,
            number,
            number,
            number,
            number,
          ];
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
