import { duplicateForSubscribe, type RedisClient } from '../shared/redis/redis';
import { Listeners } from '../shared/listeners';
import { defineLuaScript, type LuaCaller } from '../shared/redis/lua-script';
import { byCreation, decodeConsumer, encodeConsumer } from './consumer-record';
import type { ConsumerRecord, ConsumerStore } from './types';

/**
 * Redis layout (one hash tag `{c}`, so a script may touch every key on a Cluster too):
 *
 *   <ns>:consumers:{c}:by-id   HASH   consumer id → record JSON
 *   <ns>:consumers:{c}:epoch   STRING set once consumers exist here: its absence beside a non-empty
 *                                     durable copy means Redis lost them (durable-consumer-store.ts)
 *   <ns>:consumer-changes      channel of changed consumer ids, published by every write
 */
export function redisConsumerLayout(namespace: string) {
  return {
    byId: `${namespace}:consumers:{c}:by-id`,
    epoch: `${namespace}:consumers:{c}:epoch`,
    channel: `${namespace}:consumer-changes`,
  };
}

/** Writes records and publishes their ids, in one script. KEYS 1 by-id, 2 epoch. ARGV 1 channel, then id, JSON pairs. */
const PUT_SCRIPT = `
for i = 2, #ARGV, 2 do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
end
redis.call('SET', KEYS[2], '1')
for i = 2, #ARGV, 2 do redis.call('PUBLISH', ARGV[1], ARGV[i]) end
return 1`;

/** KEYS 1 by-id. ARGV 1 channel, 2 id. */
const DELETE_SCRIPT = `
local n = redis.call('HDEL', KEYS[1], ARGV[2])
if n == 1 then redis.call('PUBLISH', ARGV[1], ARGV[2]) end
return n`;

const PUT = defineLuaScript<number>('asgConsumersPut', PUT_SCRIPT, 2);
const DELETE = defineLuaScript<number>('asgConsumersDelete', DELETE_SCRIPT, 1);

/** Consumers every gateway instance shares. Construct with `RedisConsumerStore.open` to be subscribed on return. */
export class RedisConsumerStore implements ConsumerStore {
  private readonly layout: ReturnType<typeof redisConsumerLayout>;
  private readonly putScript: LuaCaller<number>;
  private readonly deleteScript: LuaCaller<number>;
  private readonly changes = new Listeners<[string]>();
  private readonly resyncs = new Listeners<[]>();
  private subscriber: RedisClient | null = null;
  private readonly onMessage = (channel: string, message: string) => {
    if (channel === this.layout.channel) this.changes.emit(message);
  };
  // ioredis subscribes again by itself after a reconnect; what was published meanwhile was missed.
  private readonly onReady = () => this.resyncs.emit();

  private constructor(
    private readonly redis: RedisClient,
    namespace: string,
  ) {
    this.layout = redisConsumerLayout(namespace);
    this.putScript = PUT.on(redis);
    this.deleteScript = DELETE.on(redis);
  }

  static async open(redis: RedisClient, namespace: string): Promise<RedisConsumerStore> {
    const store = new RedisConsumerStore(redis, namespace);
    const subscriber = await duplicateForSubscribe(redis);
    subscriber.on('message', store.onMessage);
    await subscriber.subscribe(store.layout.channel);
    subscriber.on('ready', store.onReady);
    store.subscriber = subscriber;
    return store;
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
    const pairs = records.flatMap((r) => [r.id, encodeConsumer(r)]);
    await this.putScript([this.layout.byId, this.layout.epoch], [this.layout.channel, ...pairs]);
  }

  async delete(id: string): Promise<boolean> {
    return (await this.deleteScript([this.layout.byId], [this.layout.channel, id])) === 1;
  }

  /** Whether Redis still holds the mark that consumers were written here (false after it lost its data). */
  async markerPresent(): Promise<boolean> {
    return (await this.redis.exists(this.layout.epoch)) === 1;
  }

  /** Puts back records Redis lost, leaving any it holds as they are (HSETNX), and the marker. */
  async restore(records: readonly ConsumerRecord[]): Promise<string[]> {
    const restored: string[] = [];
    for (const record of records) {
      if ((await this.redis.hsetnx(this.layout.byId, record.id, encodeConsumer(record))) === 1)
        restored.push(record.id);
    }
    await this.redis.set(this.layout.epoch, '1');
    for (const id of restored) await this.redis.publish(this.layout.channel, id);
    return restored;
  }

  onChange(listener: (id: string) => void): () => void {
    return this.changes.add(listener);
  }

  onResync(listener: () => void): () => void {
    return this.resyncs.add(listener);
  }

  async close(): Promise<void> {
    const subscriber = this.subscriber;
    this.subscriber = null;
    this.changes.clear();
    this.resyncs.clear();
    if (subscriber) {
      subscriber.off('ready', this.onReady);
      subscriber.disconnect();
    }
  }
}
