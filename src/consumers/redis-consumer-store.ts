import { setImmediate as turnOfEventLoop } from 'node:timers/promises';
import type { RedisClient } from '../shared/redis/redis';
import { ChangeFeed, type ChangeFeedOptions } from '../shared/redis/change-feed';
import { defineLuaScript, type LuaCaller } from '../shared/redis/lua-script';
import {
  LOSS_CHECK_HEALTH,
  RESTORE_UNLOCK,
  type LossCheckedRecords,
  type RecordsHealth,
} from '../shared/redis/loss-check';
import { Listeners } from '../shared/listeners';
import { byCreation, decodeConsumer, encodeConsumer } from './consumer-record';
import type { ConsumerRecord, ConsumerStore } from './types';

/**
 * Redis layout (one hash tag `{c}`, so a script may touch every key on a Cluster too):
 *
 *   <ns>:consumers:{c}:by-id    HASH   consumer id → record JSON
 *   <ns>:consumers:{c}:deleted  HASH   consumer id → when it was deleted: a durable copy that still
 *                                      holds one forgets it rather than put it back
 *   <ns>:consumers:{c}:epoch    STRING set by the loss check: its absence beside a non-empty durable
 *                                      copy means Redis lost the consumers (shared/redis/loss-check.ts)
 *   <ns>:consumers:{c}:writes   STRING every put and delete adds one; Redis only grows it, so a value
 *                                      below one seen before means a failover to a replica that missed writes
 *   <ns>:consumers:{c}:restore-lock    held by the one instance restoring lost consumers
 *   <ns>:consumer-changes       channel of changed consumer ids, published by every write
 */
export function redisConsumerLayout(namespace: string) {
  return {
    byId: `${namespace}:consumers:{c}:by-id`,
    deleted: `${namespace}:consumers:{c}:deleted`,
    epoch: `${namespace}:consumers:{c}:epoch`,
    writes: `${namespace}:consumers:{c}:writes`,
    restoreLock: `${namespace}:consumers:{c}:restore-lock`,
    channel: `${namespace}:consumer-changes`,
  };
}

/** Writes records and publishes their ids, in one script. KEYS 1 by-id, 2 deleted, 3 writes. ARGV 1 channel, then id, JSON pairs. */
const PUT_SCRIPT = `
for i = 2, #ARGV, 2 do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
  redis.call('HDEL', KEYS[2], ARGV[i])
end
redis.call('INCRBY', KEYS[3], (#ARGV - 1) / 2)
for i = 2, #ARGV, 2 do redis.call('PUBLISH', ARGV[1], ARGV[i]) end
return 1`;

/** KEYS 1 by-id, 2 deleted, 3 writes. ARGV 1 channel, 2 id, 3 deleted at. */
const DELETE_SCRIPT = `
local n = redis.call('HDEL', KEYS[1], ARGV[2])
if n == 1 then
  redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
  redis.call('INCRBY', KEYS[3], 1)
  redis.call('PUBLISH', ARGV[1], ARGV[2])
end
return n`;

/**
 * After a loss: writes each record neither held nor deleted, publishes its id; returns the ids written.
 * KEYS 1 by-id, 2 deleted. ARGV 1 channel, then id, JSON pairs.
 */
const RESTORE_MISSING_SCRIPT = `
local restored = {}
for i = 2, #ARGV, 2 do
  if redis.call('HEXISTS', KEYS[1], ARGV[i]) == 0 and redis.call('HEXISTS', KEYS[2], ARGV[i]) == 0 then
    redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
    redis.call('PUBLISH', ARGV[1], ARGV[i])
    restored[#restored + 1] = ARGV[i]
  end
end
return restored`;

const PUT = defineLuaScript<number>('asgConsumersPut', PUT_SCRIPT, 3);
const DELETE = defineLuaScript<number>('asgConsumersDelete', DELETE_SCRIPT, 3);
const RESTORE_MISSING = defineLuaScript<string[]>('asgConsumersRestoreMissing', RESTORE_MISSING_SCRIPT, 2);

/** Records a restore script writes at most (ARGV stays small). */
const RESTORE_BATCH = 200;

export type RedisConsumerStoreOptions = Pick<ChangeFeedOptions, 'subscriber'>;

/**
 * Consumers every gateway instance shares, on the same change feed (shared/redis/change-feed.ts)
 * and loss check (shared/redis/loss-check.ts) as the key records. Construct with
 * `RedisConsumerStore.open` to be subscribed on return.
 */
export class RedisConsumerStore implements ConsumerStore, LossCheckedRecords<ConsumerRecord> {
  private readonly layout: ReturnType<typeof redisConsumerLayout>;
  private readonly scripts;
  private readonly changes = new Listeners<[string]>();

  private constructor(
    private readonly redis: RedisClient,
    namespace: string,
    private readonly feed: ChangeFeed,
  ) {
    this.layout = redisConsumerLayout(namespace);
    this.scripts = {
      put: PUT.on(redis),
      delete: DELETE.on(redis),
      restoreMissing: RESTORE_MISSING.on(redis),
      health: LOSS_CHECK_HEALTH.on(redis),
      unlock: RESTORE_UNLOCK.on(redis),
    } satisfies Record<string, LuaCaller<unknown>>;
    feed.onMessage((id) => this.changes.emit(id));
  }

  static async open(
    redis: RedisClient,
    namespace: string,
    options: RedisConsumerStoreOptions = {},
  ): Promise<RedisConsumerStore> {
    const feed = await ChangeFeed.open(redis, {
      channel: redisConsumerLayout(namespace).channel,
      subscriber: options.subscriber,
    });
    return new RedisConsumerStore(redis, namespace, feed);
  }

  async list(): Promise<ConsumerRecord[]> {
    const all = await this.redis.hgetall(this.layout.byId);
    return Object.values(all)
      .map((json) => decodeConsumer(json))
      .sort(byCreation);
  }

  async get(id: string): Promise<ConsumerRecord | null> {
    const json = await this.redis.hget(this.layout.byId, id);
    return json === null ? null : decodeConsumer(json);
  }

  put(record: ConsumerRecord): Promise<void> {
    return this.putAll([record]);
  }

  async putAll(records: readonly ConsumerRecord[]): Promise<void> {
    if (records.length === 0) return;
    const { byId, deleted, writes, channel } = this.layout;
    const pairs = records.flatMap((r) => [r.id, encodeConsumer(r)]);
    await this.scripts.put([byId, deleted, writes], [channel, ...pairs]);
  }

  async delete(id: string): Promise<boolean> {
    const { byId, deleted, writes, channel } = this.layout;
    return (await this.scripts.delete([byId, deleted, writes], [channel, id, new Date().toISOString()])) === 1;
  }

  /** Marker, number of consumers and writes counter, one round trip (the loss check). */
  async health(): Promise<RecordsHealth> {
    const [marker, records, writes] = await this.scripts.health([
      this.layout.epoch,
      this.layout.byId,
      this.layout.writes,
    ]);
    return { markerPresent: marker === 1, records, writes };
  }

  async setMarker(epoch: string): Promise<boolean> {
    return (await this.redis.set(this.layout.epoch, epoch, 'NX')) === 'OK';
  }

  async lockRestore(owner: string, ttlMs: number): Promise<boolean> {
    return (await this.redis.set(this.layout.restoreLock, owner, 'PX', ttlMs, 'NX')) === 'OK';
  }

  async unlockRestore(owner: string): Promise<void> {
    await this.scripts.unlock([this.layout.restoreLock], [owner]);
  }

  /** HKEYS: consumers are few (one per customer), unlike key records. */
  ids(): Promise<string[]> {
    return this.redis.hkeys(this.layout.byId);
  }

  /** Puts back records Redis lost, leaving those it holds or were deleted as they are; the ids written. */
  async restoreMissing(records: ConsumerRecord[]): Promise<string[]> {
    const restored: string[] = [];
    for (let at = 0; at < records.length; at += RESTORE_BATCH) {
      const pairs = records.slice(at, at + RESTORE_BATCH).flatMap((r) => [r.id, encodeConsumer(r)]);
      restored.push(
        ...(await this.scripts.restoreMissing(
          [this.layout.byId, this.layout.deleted],
          [this.layout.channel, ...pairs],
        )),
      );
      await turnOfEventLoop();
    }
    return restored;
  }

  /** Of these ids, those deleted (one HMGET). */
  async deletedOf(ids: string[]): Promise<string[]> {
    if (ids.length === 0) return [];
    const at = await this.redis.hmget(this.layout.deleted, ...ids);
    return ids.filter((_, i) => at[i] !== null);
  }

  onChange(listener: (id: string) => void): () => void {
    return this.changes.add(listener);
  }

  onResync(listener: () => void): () => void {
    return this.feed.onResync(listener);
  }

  async close(): Promise<void> {
    this.changes.clear();
    await this.feed.close();
  }
}
