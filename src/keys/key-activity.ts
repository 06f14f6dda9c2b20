import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { systemClock, type Clock } from '../shared/clock';
import type { RedisClient } from '../shared/redis';
import { DEFAULT_SQLITE_BUSY_TIMEOUT_MS, sqliteStatement, type SqliteErrorListener } from '../shared/sqlite-failures';
import { SqliteWriteProbe, WRITE_PROBE_TABLE_SQL } from '../shared/sqlite-write-probe';

const DAY_MS = 86_400_000;
/** How many UTC days of usage history are kept per key (CONTRACT §5). */
export const USAGE_HISTORY_DAYS = 90;

/** What the limiter decided for one request of a key, as the usage history counts it. */
export type KeyOutcome = 'admitted' | 'rateLimited' | 'banned';

export interface KeyTally {
  admitted: number;
  rateLimited: number;
  banned: number;
  /** Epoch ms of the latest admitted request in the batch; 0 when none was admitted. */
  lastUsedAt: number;
}

export interface DayUsage {
  /** UTC day, `YYYY-MM-DD`. */
  date: string;
  admitted: number;
  rateLimited: number;
  banned: number;
}

/** Where usage is kept: Redis for every instance together, or this process alone. */
export interface KeyActivityStore {
  /**
   * True when `add` stores a batch whole or not at all, so a refused batch can be sent again without
   * counting anything twice (SQLite: one transaction). Redis runs one script per key: a failed batch
   * may be partly stored, so it is dropped rather than doubled.
   */
  readonly retriesAreSafe?: boolean;
  /** Adds a batch of tallies of UTC day `day` (days since the epoch). Counts add up; never set. */
  add(day: number, tallies: ReadonlyMap<string, KeyTally>): Promise<void>;
  /** Counts of days `firstDay`..`lastDay`, oldest first, zero-filled. */
  days(keyId: string, firstDay: number, lastDay: number): Promise<Array<Omit<DayUsage, 'date'>>>;
  /** Epoch ms of each key's latest admitted request; keys never used are absent. */
  lastUsed(keyIds: readonly string[]): Promise<Map<string, number>>;
}

/**
 * Key-day tallies kept while the store refuses batches (about 100 bytes each: a few MB at most).
 * Beyond it the oldest days are dropped and counted.
 */
export const MAX_RETAINED_TALLIES = 50_000;

function requestsIn(tallies: Iterable<KeyTally>): number {
  let requests = 0;
  for (const t of tallies) requests += t.admitted + t.rateLimited + t.banned;
  return requests;
}

function emptyTally(): KeyTally {
  return { admitted: 0, rateLimited: 0, banned: 0, lastUsedAt: 0 };
}

export function dayOf(epochMs: number): number {
  return Math.floor(epochMs / DAY_MS);
}

function dateOf(day: number): string {
  return new Date(day * DAY_MS).toISOString().slice(0, 10);
}

/**
 * Counts each key's requests (admitted, rate-limited, banned) and its last use without touching the
 * store on the request path: tallies gather in memory per UTC day and go to the store in one batch
 * every few seconds and at shutdown, as the deprecated-callers report does.
 */
export class KeyActivityRecorder {
  /** day → key id → tally. */
  private pending = new Map<number, Map<string, KeyTally>>();
  private readonly timer: NodeJS.Timeout;
  private flushing: Promise<void> = Promise.resolve();

  constructor(
    private readonly store: KeyActivityStore,
    private readonly clock: Clock,
    flushIntervalMs = 5000,
    private readonly onFlushError: (err: unknown) => void = () => {},
    /** Requests whose counts were given up on (a batch the store refused, beyond what is kept): gateway_key_usage_dropped_total. */
    private readonly onDropped: (requests: number) => void = () => {},
  ) {
    this.timer = setInterval(() => void this.flush(), flushIntervalMs);
    this.timer.unref();
  }

  record(keyId: string, outcome: KeyOutcome): void {
    const now = this.clock.now();
    const day = dayOf(now);
    let tallies = this.pending.get(day);
    if (!tallies) this.pending.set(day, (tallies = new Map()));
    let tally = tallies.get(keyId);
    if (!tally) tallies.set(keyId, (tally = emptyTally()));
    tally[outcome] += 1;
    if (outcome === 'admitted') tally.lastUsedAt = now;
  }

  /**
   * Sends what has gathered. Flushes run one after another, so a batch is never written twice. A
   * batch the store refused is reported; when the store's retries are safe it goes back into the
   * pending tallies (up to MAX_RETAINED_TALLIES, oldest days dropped first and counted) and is sent
   * with the next flush, else it is dropped and counted: a count may be lost, never doubled.
   */
  flush(): Promise<void> {
    this.flushing = this.flushing.then(() => this.flushOnce());
    return this.flushing;
  }

  async usage(keyId: string, days: number): Promise<{ keyId: string; days: DayUsage[] }> {
    await this.flush();
    const lastDay = dayOf(this.clock.now());
    const firstDay = lastDay - days + 1;
    const counts = await this.store.days(keyId, firstDay, lastDay);
    return { keyId, days: counts.map((c, i) => ({ date: dateOf(firstDay + i), ...c })) };
  }

  async lastUsed(keyIds: readonly string[]): Promise<Map<string, number>> {
    await this.flush();
    return this.store.lastUsed(keyIds);
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.flush();
  }

  private async flushOnce(): Promise<void> {
    if (this.pending.size === 0) return;
    const batch = this.pending;
    this.pending = new Map();
    for (const [day, tallies] of batch) {
      try {
        await this.store.add(day, tallies);
      } catch (err) {
        this.onFlushError(err);
        if (this.store.retriesAreSafe) this.keep(day, tallies);
        else this.onDropped(requestsIn(tallies.values()));
      }
    }
    this.dropBeyondBound();
  }

  /** Adds a refused batch back to what is pending (counts add up, the later last use wins). */
  private keep(day: number, tallies: ReadonlyMap<string, KeyTally>): void {
    let pendingDay = this.pending.get(day);
    if (!pendingDay) this.pending.set(day, (pendingDay = new Map()));
    for (const [keyId, tally] of tallies) {
      const current = pendingDay.get(keyId) ?? emptyTally();
      pendingDay.set(keyId, {
        admitted: current.admitted + tally.admitted,
        rateLimited: current.rateLimited + tally.rateLimited,
        banned: current.banned + tally.banned,
        lastUsedAt: Math.max(current.lastUsedAt, tally.lastUsedAt),
      });
    }
  }

  /** Memory stays bounded during a long outage: the oldest days' tallies go first, counted. */
  private dropBeyondBound(): void {
    let retained = 0;
    for (const tallies of this.pending.values()) retained += tallies.size;
    for (const day of [...this.pending.keys()].sort((a, b) => a - b)) {
      if (retained <= MAX_RETAINED_TALLIES) return;
      const tallies = this.pending.get(day)!;
      this.pending.delete(day);
      retained -= tallies.size;
      this.onDropped(requestsIn(tallies.values()));
    }
  }
}

/** Held in process only: for tests of the recorder, and for a process with nowhere to write. */
export class MemoryKeyActivityStore implements KeyActivityStore {
  readonly retriesAreSafe: boolean = true;
  /** key id → day → counts. */
  private readonly counts = new Map<string, Map<number, Omit<KeyTally, 'lastUsedAt'>>>();
  private readonly lastUses = new Map<string, number>();

  async add(day: number, tallies: ReadonlyMap<string, KeyTally>): Promise<void> {
    for (const [keyId, tally] of tallies) {
      let days = this.counts.get(keyId);
      if (!days) this.counts.set(keyId, (days = new Map()));
      const counts = days.get(day) ?? { admitted: 0, rateLimited: 0, banned: 0 };
      counts.admitted += tally.admitted;
      counts.rateLimited += tally.rateLimited;
      counts.banned += tally.banned;
      days.set(day, counts);
      for (const old of days.keys()) if (old <= day - USAGE_HISTORY_DAYS) days.delete(old);
      if (tally.lastUsedAt > (this.lastUses.get(keyId) ?? 0)) this.lastUses.set(keyId, tally.lastUsedAt);
    }
  }

  async days(keyId: string, firstDay: number, lastDay: number): Promise<Array<Omit<DayUsage, 'date'>>> {
    const days = this.counts.get(keyId);
    const result: Array<Omit<DayUsage, 'date'>> = [];
    for (let day = firstDay; day <= lastDay; day++) {
      const c = days?.get(day);
      result.push({ admitted: c?.admitted ?? 0, rateLimited: c?.rateLimited ?? 0, banned: c?.banned ?? 0 });
    }
    return result;
  }

  async lastUsed(keyIds: readonly string[]): Promise<Map<string, number>> {
    const result = new Map<string, number>();
    for (const id of keyIds) {
      const at = this.lastUses.get(id);
      if (at !== undefined) result.set(id, at);
    }
    return result;
  }
}

export const KEY_USAGE_DATABASE_FILE = 'key-usage.sqlite';
/** This store's name in errors, metrics and /readyz. */
const KEY_USAGE_DATABASE = 'key-usage';

/**
 * The single-instance store when a data directory is given: SQLite under it, so the history and
 * last use survive a restart like the keys do. Written only by flushes (every few seconds, one
 * transaction), never on the request path.
 */
export class SqliteKeyActivityStore implements KeyActivityStore {
  /** add() is one transaction: a refused batch stored nothing and can be sent again. */
  readonly retriesAreSafe = true;
  private readonly db: Database.Database;
  private readonly writeProbe: SqliteWriteProbe;
  private readonly addCounts: Database.Statement<[string, number, number, number, number]>;
  private readonly addLastUse: Database.Statement<[string, number]>;
  private readonly dropOld: Database.Statement<[number]>;
  private readonly selectDays: Database.Statement<[string, number, number]>;

  constructor(
    dataDir: string,
    private readonly options: { busyTimeoutMs?: number; onSqliteError?: SqliteErrorListener } = {},
  ) {
    fs.mkdirSync(dataDir, { recursive: true });
    this.db = new Database(path.join(dataDir, KEY_USAGE_DATABASE_FILE));
    try {
      this.db.pragma('journal_mode = WAL');
      this.db.pragma(`busy_timeout = ${options.busyTimeoutMs ?? DEFAULT_SQLITE_BUSY_TIMEOUT_MS}`);
      this.db.exec(WRITE_PROBE_TABLE_SQL);
      this.db.exec(`
        CREATE TABLE IF NOT EXISTS key_usage (
          key_id TEXT NOT NULL, day INTEGER NOT NULL,
          admitted INTEGER NOT NULL, rate_limited INTEGER NOT NULL, banned INTEGER NOT NULL,
          PRIMARY KEY (key_id, day)
        ) STRICT;
        CREATE TABLE IF NOT EXISTS key_last_use (key_id TEXT PRIMARY KEY, at INTEGER NOT NULL) STRICT;`);
      this.addCounts = this.db.prepare(
        `INSERT INTO key_usage (key_id, day, admitted, rate_limited, banned) VALUES (?, ?, ?, ?, ?)
         ON CONFLICT (key_id, day) DO UPDATE SET admitted = admitted + excluded.admitted,
           rate_limited = rate_limited + excluded.rate_limited, banned = banned + excluded.banned`,
      );
      this.addLastUse = this.db.prepare(
        `INSERT INTO key_last_use (key_id, at) VALUES (?, ?) ON CONFLICT (key_id) DO UPDATE SET at = max(at, excluded.at)`,
      );
      this.dropOld = this.db.prepare('DELETE FROM key_usage WHERE day <= ?');
      this.selectDays = this.db.prepare('SELECT day, admitted, rate_limited, banned FROM key_usage WHERE key_id = ? AND day BETWEEN ? AND ?');
      this.writeProbe = new SqliteWriteProbe(this.db, KEY_USAGE_DATABASE, systemClock, options.onSqliteError);
    } catch (err) {
      this.db.close();
      throw err;
    }
  }

  async add(day: number, tallies: ReadonlyMap<string, KeyTally>): Promise<void> {
    const addAll = this.db.transaction(() => {
      for (const [keyId, tally] of tallies) {
        this.addCounts.run(keyId, day, tally.admitted, tally.rateLimited, tally.banned);
        if (tally.lastUsedAt > 0) this.addLastUse.run(keyId, tally.lastUsedAt);
      }
      this.dropOld.run(day - USAGE_HISTORY_DAYS);
    });
    sqliteStatement(KEY_USAGE_DATABASE, () => addAll(), this.options.onSqliteError);
  }

  /** Throws when key-usage.sqlite cannot take a write now (the gateway's /readyz). */
  checkWrites(): void {
    this.writeProbe.check();
  }

  async days(keyId: string, firstDay: number, lastDay: number): Promise<Array<Omit<DayUsage, 'date'>>> {
    const rows = this.selectDays.all(keyId, firstDay, lastDay) as Array<{ day: number; admitted: number; rate_limited: number; banned: number }>;
    const byDay = new Map(rows.map((r) => [r.day, r]));
    const result: Array<Omit<DayUsage, 'date'>> = [];
    for (let day = firstDay; day <= lastDay; day++) {
      const r = byDay.get(day);
      result.push({ admitted: r?.admitted ?? 0, rateLimited: r?.rate_limited ?? 0, banned: r?.banned ?? 0 });
    }
    return result;
  }

  async lastUsed(keyIds: readonly string[]): Promise<Map<string, number>> {
    const result = new Map<string, number>();
    if (keyIds.length === 0) return result;
    // In slices: SQLite bounds the number of parameters of one statement.
    for (let start = 0; start < keyIds.length; start += 500) {
      const slice = keyIds.slice(start, start + 500);
      const rows = this.db.prepare(`SELECT key_id, at FROM key_last_use WHERE key_id IN (${slice.map(() => '?').join(',')})`).all(...slice) as Array<{ key_id: string; at: number }>;
      for (const row of rows) result.set(row.key_id, row.at);
    }
    return result;
  }

  close(): void {
    this.db.close();
  }
}

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
