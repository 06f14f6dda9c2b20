import type { WebhookEventType } from '../shared/config';
import { defineLuaScript, type LuaCaller } from '../shared/lua-script';
import type { RedisClient } from '../shared/redis';
import type { ClaimedDelivery, Outbox, OutboxEvent } from './outbox';

/**
 * The outbox in Redis, shared by every instance and worker: an instance that dies leaves its
 * events to the others. Every key carries the hash tag `{outbox}`, so each script below touches one
 * Cluster slot (events are rare: a few per key and day, so one slot carries them easily).
 *
 *   <ns>:webhooks:{outbox}:events     HASH  event id → {type, body, createdAt, endpoints}
 *   <ns>:webhooks:{outbox}:order      ZSET  event id → createdAt (which are the oldest, for the bound)
 *   <ns>:webhooks:{outbox}:seen       ZSET  event id → seenUntil (an event added again is recognised)
 *   <ns>:webhooks:{outbox}:left       HASH  event id → deliveries not yet finished
 *   <ns>:webhooks:{outbox}:attempts   HASH  "<endpoint> <event id>" → attempts made
 *   <ns>:webhooks:{outbox}:due:<endpoint>  ZSET  event id → when it is due (a claim moves it to its lease's end)
 *   <ns>:webhooks:{outbox}:receivers  HASH  endpoint → 1 for each that has (or had) a due set: what keepReceivers looks through
 *                                           (a hash, not a set: the documented ACL has the hash commands)
 *   <ns>:webhooks:{outbox}:instances  HASH  instance → "<liveUntil> <endpoint>,<endpoint>…" (the receivers each names)
 *   <ns>:webhooks:{outbox}:receivers-indexed  STRING  set once `receivers` names the endpoints of events written before it existed
 *
 * The scripts name the due sets of endpoints they learn from an event record by prefix rather than
 * in KEYS; they share the hash tag, so they live in the same slot.
 */

/** KEYS 1 events, 2 order, 3 seen, 4 left, 5 attempts, 6 receivers. ARGV 1 now, 2 max events, 3 due-set prefix, then per event: id, seenUntil, createdAt, record, endpoints (comma-separated). Reply: the types of the events dropped. */
const ADD_LUA = `
local now = tonumber(ARGV[1])
local duePrefix = ARGV[3]
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
for i = 4, #ARGV, 5 do
  local id = ARGV[i]
  if not redis.call('ZSCORE', KEYS[3], id) then
    redis.call('ZADD', KEYS[3], ARGV[i + 1], id)
    redis.call('HSET', KEYS[1], id, ARGV[i + 3])
    redis.call('ZADD', KEYS[2], ARGV[i + 2], id)
    local n = 0
    for endpoint in string.gmatch(ARGV[i + 4], '[^,]+') do
      redis.call('ZADD', duePrefix .. endpoint, now, id)
      redis.call('HSET', KEYS[6], endpoint, 1)
      n = n + 1
    end
    redis.call('HSET', KEYS[4], id, n)
  end
end
local dropped = {}
local excess = redis.call('ZCARD', KEYS[2]) - tonumber(ARGV[2])
if excess > 0 then
  local oldest = redis.call('ZPOPMIN', KEYS[2], excess)
  for j = 1, #oldest, 2 do
    local id = oldest[j]
    local record = redis.call('HGET', KEYS[1], id)
    if record then
      local decoded = cjson.decode(record)
      for _, endpoint in ipairs(decoded.endpoints) do
        redis.call('ZREM', duePrefix .. endpoint, id)
        redis.call('HDEL', KEYS[5], endpoint .. ' ' .. id)
      end
      table.insert(dropped, decoded.type)
    end
    redis.call('HDEL', KEYS[1], id)
    redis.call('HDEL', KEYS[4], id)
  end
end
return dropped`;

/** KEYS 1 the endpoint's due set, 2 events, 3 attempts. ARGV 1 now, 2 max, 3 lease end, 4 endpoint. Reply: id, record, attempts, … */
const CLAIM_LUA = `
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
local claimed = {}
for _, id in ipairs(ids) do
  local record = redis.call('HGET', KEYS[2], id)
  if record then
    redis.call('ZADD', KEYS[1], ARGV[3], id)
    table.insert(claimed, id)
    table.insert(claimed, record)
    table.insert(claimed, redis.call('HGET', KEYS[3], ARGV[4] .. ' ' .. id) or '0')
  else
    redis.call('ZREM', KEYS[1], id)
  end
end
return claimed`;

/**
 * KEYS 1 instances, 2 receivers, 3 events, 4 order, 5 left, 6 attempts. ARGV 1 now, 2 instance, 3 its
 * liveUntil, 4 its endpoints (comma-separated), 5 due-set prefix, 6 most deliveries to drop. Names
 * the instance's receivers, forgets instances not heard of since their liveUntil, and drops the
 * deliveries to endpoints no instance names (one under a claim too: its late finish then matches
 * nothing). Reply: the type of each delivery dropped.
 */
const KEEP_RECEIVERS_LUA = `
local now = tonumber(ARGV[1])
local duePrefix = ARGV[5]
if ARGV[4] == '' then
  redis.call('HDEL', KEYS[1], ARGV[2])
else
  redis.call('HSET', KEYS[1], ARGV[2], ARGV[3] .. ' ' .. ARGV[4])
end
local named = {}
local instances = redis.call('HGETALL', KEYS[1])
for i = 1, #instances, 2 do
  local liveUntil, endpoints = string.match(instances[i + 1], '^(%S+) ?(.*)$')
  if tonumber(liveUntil) <= now then
    redis.call('HDEL', KEYS[1], instances[i])
  else
    for endpoint in string.gmatch(endpoints, '[^,]+') do named[endpoint] = true end
  end
end
local budget = tonumber(ARGV[6])
local dropped = {}
for _, endpoint in ipairs(redis.call('HKEYS', KEYS[2])) do
  if budget <= 0 then break end
  local due = duePrefix .. endpoint
  if not named[endpoint] then
    for _, id in ipairs(redis.call('ZRANGE', due, 0, budget - 1)) do
      redis.call('ZREM', due, id)
      redis.call('HDEL', KEYS[6], endpoint .. ' ' .. id)
      local record = redis.call('HGET', KEYS[3], id)
      if record then table.insert(dropped, cjson.decode(record).type) end
      if redis.call('HINCRBY', KEYS[5], id, -1) <= 0 then
        redis.call('HDEL', KEYS[3], id)
        redis.call('ZREM', KEYS[4], id)
        redis.call('HDEL', KEYS[5], id)
      end
      budget = budget - 1
    end
  end
  if redis.call('EXISTS', due) == 0 then redis.call('HDEL', KEYS[2], endpoint) end
end
return dropped`;

/** Whether this claim still owns the delivery: its due score is still the lease end it set. */
const OWNS_LUA = `local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not score or tonumber(score) ~= tonumber(ARGV[2]) then return 0 end`;

/** KEYS 1 due set, 2 events, 3 order, 4 left, 5 attempts. ARGV 1 id, 2 lease end, 3 endpoint. */
const FINISH_LUA = `
${OWNS_LUA}
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[5], ARGV[3] .. ' ' .. ARGV[1])
if redis.call('HINCRBY', KEYS[4], ARGV[1], -1) <= 0 then
  redis.call('HDEL', KEYS[2], ARGV[1])
  redis.call('ZREM', KEYS[3], ARGV[1])
  redis.call('HDEL', KEYS[4], ARGV[1])
end
return 1`;

/** KEYS 1 due set, 2 attempts. ARGV 1 id, 2 lease end, 3 endpoint, 4 when due again, 5 attempts to add (1 retry, 0 release). */
const RESCHEDULE_LUA = `
${OWNS_LUA}
redis.call('ZADD', KEYS[1], ARGV[4], ARGV[1])
if ARGV[5] ~= '0' then redis.call('HINCRBY', KEYS[2], ARGV[3] .. ' ' .. ARGV[1], ARGV[5]) end
return 1`;

const ADD = defineLuaScript<string[]>('asgWebhookOutboxAdd', ADD_LUA, 6);
const KEEP_RECEIVERS = defineLuaScript<string[]>('asgWebhookOutboxKeepReceivers', KEEP_RECEIVERS_LUA, 6);
const CLAIM = defineLuaScript<string[]>('asgWebhookOutboxClaim', CLAIM_LUA, 3);
const FINISH = defineLuaScript<number>('asgWebhookOutboxFinish', FINISH_LUA, 5);
const RESCHEDULE = defineLuaScript<number>('asgWebhookOutboxReschedule', RESCHEDULE_LUA, 2);

/** Events read per HSCAN page by the one-time index of receivers. */
const INDEX_PAGE = 500;

/** What the events hash holds per event. */
interface StoredEvent {
  type: WebhookEventType;
  body: string;
  createdAt: number;
  endpoints: string[];
}

export class RedisOutbox implements Outbox {
  private readonly scripts: { add: LuaCaller<string[]>; keepReceivers: LuaCaller<string[]>; claim: LuaCaller<string[]>; finish: LuaCaller<number>; reschedule: LuaCaller<number> };
  private readonly prefix: string;
  /** The one-time index of endpoints named by events written before `receivers` existed, once this instance has it. */
  private indexed: Promise<void> | null = null;

  constructor(
    private readonly redis: RedisClient,
    namespace: string,
  ) {
    this.prefix = `${namespace}:webhooks:{outbox}:`;
    this.scripts = { add: ADD.on(redis), keepReceivers: KEEP_RECEIVERS.on(redis), claim: CLAIM.on(redis), finish: FINISH.on(redis), reschedule: RESCHEDULE.on(redis) };
  }

  private key(name: 'events' | 'order' | 'seen' | 'left' | 'attempts' | 'receivers' | 'instances' | 'receivers-indexed'): string {
    return this.prefix + name;
  }

  private due(endpoint: string): string {
    return `${this.prefix}due:${endpoint}`;
  }

  /** One script call for the whole batch: the writer sends what gathered since its last flush. */
  async add(events: readonly OutboxEvent[], now: number, maxEvents: number): Promise<WebhookEventType[]> {
    const argv = [String(now), String(maxEvents), `${this.prefix}due:`];
    for (const e of events) {
      const stored: StoredEvent = { type: e.type, body: e.body, createdAt: e.createdAt, endpoints: [...e.endpoints] };
      argv.push(e.id, String(e.seenUntil), String(e.createdAt), JSON.stringify(stored), e.endpoints.join(','));
    }
    const dropped = await this.scripts.add([this.key('events'), this.key('order'), this.key('seen'), this.key('left'), this.key('attempts'), this.key('receivers')], argv);
    return dropped as WebhookEventType[];
  }

  async keepReceivers(instance: string, endpoints: readonly string[], now: number, liveUntil: number, maxDrops: number): Promise<WebhookEventType[]> {
    this.indexed ??= this.indexReceivers().catch((err: unknown) => {
      this.indexed = null;
      throw err;
    });
    await this.indexed;
    const keys = [this.key('instances'), this.key('receivers'), this.key('events'), this.key('order'), this.key('left'), this.key('attempts')];
    const dropped = await this.scripts.keepReceivers(keys, [String(now), instance, String(liveUntil), endpoints.join(','), `${this.prefix}due:`, String(maxDrops)]);
    return dropped as WebhookEventType[];
  }

  /**
   * An outbox written before `receivers` existed has due sets it does not name: read the events
   * once, a page at a time (so Redis is never held for long), and name their endpoints. The first
   * instance to finish marks it done for all; running it twice only adds names already there.
   */
  private async indexReceivers(): Promise<void> {
    if ((await this.redis.exists(this.key('receivers-indexed'))) === 1) return;
    let cursor = '0';
    let events = 0;
    do {
      const [next, fields] = await this.redis.hscan(this.key('events'), cursor, 'COUNT', INDEX_PAGE);
      cursor = next;
      events += fields.length / 2;
      const endpoints = new Set<string>();
      for (let i = 1; i < fields.length; i += 2) for (const endpoint of (JSON.parse(fields[i]!) as StoredEvent).endpoints) endpoints.add(endpoint);
      if (endpoints.size > 0) await this.redis.hset(this.key('receivers'), Object.fromEntries([...endpoints].map((endpoint) => [endpoint, '1'])));
    } while (cursor !== '0');
    // An empty outbox needs no mark: whatever is added from now on names its receivers as it goes.
    if (events > 0) await this.redis.set(this.key('receivers-indexed'), '1');
  }

  async forgetInstance(instance: string): Promise<void> {
    await this.redis.hdel(this.key('instances'), instance);
  }

  async claim(endpoint: string, max: number, now: number, leaseUntil: number): Promise<ClaimedDelivery[]> {
    const reply = await this.scripts.claim([this.due(endpoint), this.key('events'), this.key('attempts')], [String(now), String(max), String(leaseUntil), endpoint]);
    const claimed: ClaimedDelivery[] = [];
    for (let i = 0; i < reply.length; i += 3) {
      const stored = JSON.parse(reply[i + 1]!) as StoredEvent;
      claimed.push({ endpoint, eventId: reply[i]!, type: stored.type, body: stored.body, createdAt: stored.createdAt, attempts: Number(reply[i + 2]), leaseUntil });
    }
    return claimed;
  }

  async finish(d: ClaimedDelivery): Promise<void> {
    await this.scripts.finish([this.due(d.endpoint), this.key('events'), this.key('order'), this.key('left'), this.key('attempts')], [d.eventId, String(d.leaseUntil), d.endpoint]);
  }

  async retry(d: ClaimedDelivery, nextAt: number): Promise<void> {
    await this.scripts.reschedule([this.due(d.endpoint), this.key('attempts')], [d.eventId, String(d.leaseUntil), d.endpoint, String(nextAt), '1']);
  }

  async release(d: ClaimedDelivery, now: number): Promise<void> {
    await this.scripts.reschedule([this.due(d.endpoint), this.key('attempts')], [d.eventId, String(d.leaseUntil), d.endpoint, String(now), '0']);
  }

  async size(): Promise<number> {
    return this.redis.zcard(this.key('order'));
  }

  /** The client is the caller's. */
  close(): void {}
}
