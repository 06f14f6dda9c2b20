import { defineLuaScript, type LuaCaller } from '../../shared/redis/lua-script';
import type { RedisClient } from '../../shared/redis/redis';
import { DAY_MS } from '../key-activity';
import { PERIOD_DAYS_KEPT } from './period-ledger';
import { decodeState, encodeState, type SentState, type SentStateStore } from './sent-state';

/**
 * Redis layout (docs/metering.md):
 *   <ns>:usage-events:{<key id>}:sent:<period ms>:<day>  STRING  `<version>\n<json>`: what was sent of
 *                                    the key's periods that day, and events not yet in the outbox;
 *                                    expires PERIOD_DAYS_KEPT after its last write
 *   <ns>:usage-events:{closer}:lease  STRING  the instance closing periods now (SET PX)
 */

/** KEYS 1 the state. ARGV 1 expected version, 2 the new text (version first), 3 TTL ms. */
const WRITE_LUA = `
local held = redis.call('GET', KEYS[1])
local version = 0
if held then version = tonumber(string.match(held, '^(%d+)\\n')) end
if version ~= tonumber(ARGV[1]) then return 0 end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return 1`;

/** KEYS 1 the lease. ARGV 1 owner, 2 ms. */
const LEASE_LUA = `
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1`;

const WRITE = defineLuaScript<number>('asgUsageSentWrite', WRITE_LUA, 1);
const LEASE = defineLuaScript<number>('asgUsageCloserLease', LEASE_LUA, 1);

export class RedisSentStateStore implements SentStateStore {
  private readonly writeScript: LuaCaller<number>;
  private readonly leaseScript: LuaCaller<number>;

  constructor(
    private readonly redis: RedisClient,
    private readonly namespace: string,
  ) {
    this.writeScript = WRITE.on(redis);
    this.leaseScript = LEASE.on(redis);
  }

  private stateKey(keyId: string, periodMs: number, day: number): string {
    return `${this.namespace}:usage-events:{${keyId}}:sent:${periodMs}:${day}`;
  }

  async read(keyId: string, periodMs: number, day: number): Promise<SentState> {
    const held = await this.redis.get(this.stateKey(keyId, periodMs, day));
    if (held === null) return decodeState(0, null);
    const newline = held.indexOf('\n');
    return decodeState(Number(held.slice(0, newline)), held.slice(newline + 1));
  }

  async write(
    keyId: string,
    periodMs: number,
    day: number,
    expected: number,
    next: Omit<SentState, 'version'>,
  ): Promise<boolean> {
    const text = `${expected + 1}\n${encodeState(next)}`;
    return (
      (await this.writeScript(
        [this.stateKey(keyId, periodMs, day)],
        [String(expected), text, String(PERIOD_DAYS_KEPT * DAY_MS)],
      )) === 1
    );
  }

  async lease(owner: string, _now: number, leaseMs: number): Promise<boolean> {
    return (await this.leaseScript([`${this.namespace}:usage-events:{closer}:lease`], [owner, String(leaseMs)])) === 1;
  }

  /** The client is the caller's. */
  close(): void {}
}
