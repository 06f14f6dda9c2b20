import type { WebhookEventType } from '../shared/config';
import { defineLuaScript, type LuaCaller } from '../shared/redis/lua-script';
import type { RedisClient } from '../shared/redis/redis';
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
 * Every script is given in KEYS each key it touches (docs/redis.md): the due sets too. ADD and
 * KEEP_RECEIVERS may reach due sets the caller cannot know for sure beforehand (those of the events
 * the bound drops, those of every receiver), so they look first, before writing anything: a due set
 * they would touch and were not given is answered as missing, and the caller sends the call again
 * with it (RedisOutbox.withDueSets).
 */

/** First element of ADD's and KEEP_RECEIVERS's reply: done (the rest as described), or due sets missing (the endpoints follow). */
const DONE = 1;
const MISSING = 0;

/** Lua: `due`, the due sets the call was given (KEYS from \`first\` on), as a set. */
function declaredDueSetsLua(first: number): string {
  return `local due = {}
for i = ${first}, #KEYS do due[KEYS[i]] = true end`;
}

/**
 * KEYS 1 events, 2 order, 3 seen, 4 left, 5 attempts, 6 receivers, then the due sets it may touch:
 * those of the events added and of the receivers the caller knows. ARGV 1 now, 2 max events, 3
 * due-set prefix, then per event: id, seenUntil, createdAt, record, endpoints (comma-separated).
 * Reply: {DONE, the types of the events dropped…}, or {MISSING, endpoints…} with nothing written when
 * the bound would drop an event for an endpoint whose due set was not given. The events the bound
 * may drop are among the `excess` oldest before the batch (or in the batch, whose due sets are given).
 */
const ADD_LUA = `
local now = tonumber(ARGV[1])
local duePrefix = ARGV[3]
${declaredDueSetsLua(7)}
local excess = redis.call('ZCARD', KEYS[2]) + (#ARGV - 3) / 5 - tonumber(ARGV[2])
if excess > 0 then
  local missing = {${MISSING}}
  for _, id in ipairs(redis.call('ZRANGE', KEYS[2], 0, excess - 1)) do
    local record = redis.call('HGET', KEYS[1], id)
    if record then
      for _, endpoint in ipairs(cjson.decode(record).endpoints) do
        if not due[duePrefix .. endpoint] then table.insert(missing, endpoint) end
      end
    end
  end
  if #missing > 1 then return missing end
end
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
local dropped = {${DONE}}
excess = redis.call('ZCARD', KEYS[2]) - tonumber(ARGV[2])
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
 * KEYS 1 instances, 2 receivers, 3 events, 4 order, 5 left, 6 attempts, then the due set of each
 * receiver the caller knows. ARGV 1 now, 2 instance, 3 its liveUntil, 4 its endpoints
 * (comma-separated), 5 due-set prefix, 6 most deliveries to drop. Names the instance's receivers,
 * forgets instances not heard of since their liveUntil, and drops the deliveries to endpoints no
 * instance names (one under a claim too: its late finish then matches nothing). Reply: {DONE, the
 * type of each delivery dropped…}, or {MISSING, endpoints…} with nothing written when `receivers`
 * names an endpoint whose due set was not given.
 */
const KEEP_RECEIVERS_LUA = `
local now = tonumber(ARGV[1])
local duePrefix = ARGV[5]
${declaredDueSetsLua(7)}
local receivers = redis.call('HKEYS', KEYS[2])
local missing = {${MISSING}}
for _, endpoint in ipairs(receivers) do
  if not due[duePrefix .. endpoint] then table.insert(missing, endpoint) end
end
if #missing > 1 then return missing end
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
local dropped = {${DONE}}
for _, endpoint in ipairs(receivers) do
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

type DueSetsReply = [typeof DONE | typeof MISSING, ...string[]];
// Six keys, then the due sets: the count varies with the call.
const ADD = defineLuaScript<DueSetsReply>('asgWebhookOutboxAdd', ADD_LUA);
const KEEP_RECEIVERS = defineLuaScript<DueSetsReply>('asgWebhookOutboxKeepReceivers', KEEP_RECEIVERS_LUA);

/** Calls of ADD or KEEP_RECEIVERS in a row that each found a due set missing: then something is wrong. */
const DUE_SET_ATTEMPTS = 5;
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
  private readonly scripts: {
    add: LuaCaller<DueSetsReply>;
    keepReceivers: LuaCaller<DueSetsReply>;
    claim: LuaCaller<string[]>;
    finish: LuaCaller<number>;
    reschedule: LuaCaller<number>;
  };
  private readonly prefix: string;
  /** Endpoints whose due sets ADD and KEEP_RECEIVERS are given besides their own: every one this process has heard of. */
  private readonly knownReceivers = new Set<string>();
  /** The one-time index of endpoints named by events written before `receivers` existed, once this instance has it. */
  private indexed: Promise<void> | null = null;

  constructor(
    private readonly redis: RedisClient,
    namespace: string,
  ) {
    this.prefix = `${namespace}:webhooks:{outbox}:`;
    this.scripts = {
      add: ADD.on(redis),
      keepReceivers: KEEP_RECEIVERS.on(redis),
      claim: CLAIM.on(redis),
      finish: FINISH.on(redis),
      reschedule: RESCHEDULE.on(redis),
    };
  }

  private key(
    name: 'events' | 'order' | 'seen' | 'left' | 'attempts' | 'receivers' | 'instances' | 'receivers-indexed',
  ): string {
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
    const keys = [
      this.key('events'),
      this.key('order'),
      this.key('seen'),
      this.key('left'),
      this.key('attempts'),
      this.key('receivers'),
    ];
    const dropped = await this.withDueSets(
      events.flatMap((e) => e.endpoints),
      (dueSets) => this.scripts.add([...keys, ...dueSets], argv),
    );
    return dropped as WebhookEventType[];
  }

  /**
   * Runs ADD or KEEP_RECEIVERS with the due sets of `endpoints` and of every receiver known here;
   * when the script answers that it needs others, learns them and sends it again.
   */
  private async withDueSets(
    endpoints: readonly string[],
    call: (dueSets: string[]) => Promise<DueSetsReply>,
  ): Promise<string[]> {
    for (const endpoint of endpoints) this.knownReceivers.add(endpoint);
    for (let attempt = 0; attempt < DUE_SET_ATTEMPTS; attempt++) {
      const [status, ...rest] = await call([...this.knownReceivers].map((endpoint) => this.due(endpoint)));
      if (status === DONE) return rest;
      for (const endpoint of rest) this.knownReceivers.add(endpoint);
    }
    throw new Error(`the webhook outbox still named due sets it was not given after ${DUE_SET_ATTEMPTS} attempts`);
  }

  async keepReceivers(
    instance: string,
    endpoints: readonly string[],
    now: number,
    liveUntil: number,
    maxDrops: number,
  ): Promise<WebhookEventType[]> {
    this.indexed ??= this.indexReceivers().catch((err: unknown) => {
      this.indexed = null;
      throw err;
    });
    await this.indexed;
    const keys = [
      this.key('instances'),
      this.key('receivers'),
      this.key('events'),
      this.key('order'),
      this.key('left'),
      this.key('attempts'),
    ];
    const argv = [
      String(now),
      instance,
      String(liveUntil),
      endpoints.join(','),
      `${this.prefix}due:`,
      String(maxDrops),
    ];
    const dropped = await this.withDueSets(endpoints, (dueSets) =>
      this.scripts.keepReceivers([...keys, ...dueSets], argv),
    );
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
      for (let i = 1; i < fields.length; i += 2)
        for (const endpoint of (JSON.parse(fields[i]!) as StoredEvent).endpoints) endpoints.add(endpoint);
      if (endpoints.size > 0)
        await this.redis.hset(
          this.key('receivers'),
          Object.fromEntries([...endpoints].map((endpoint) => [endpoint, '1'])),
        );
    } while (cursor !== '0');
    // An empty outbox needs no mark: whatever is added from now on names its receivers as it goes.
    if (events > 0) await this.redis.set(this.key('receivers-indexed'), '1');
  }

  async forgetInstance(instance: string): Promise<void> {
    await this.redis.hdel(this.key('instances'), instance);
  }

  async claim(endpoint: string, max: number, now: number, leaseUntil: number): Promise<ClaimedDelivery[]> {
    const reply = await this.scripts.claim(
      [this.due(endpoint), this.key('events'), this.key('attempts')],
      [String(now), String(max), String(leaseUntil), endpoint],
    );
    const claimed: ClaimedDelivery[] = [];
    for (let i = 0; i < reply.length; i += 3) {
      const stored = JSON.parse(reply[i + 1]!) as StoredEvent;
      claimed.push({
        endpoint,
        eventId: reply[i]!,
        type: stored.type,
        body: stored.body,
        createdAt: stored.createdAt,
        attempts: Number(reply[i + 2]),
        leaseUntil,
      });
    }
    return claimed;
  }

  async finish(d: ClaimedDelivery): Promise<void> {
    await this.scripts.finish(
      [this.due(d.endpoint), this.key('events'), this.key('order'), this.key('left'), this.key('attempts')],
      [d.eventId, String(d.leaseUntil), d.endpoint],
    );
  }

  async retry(d: ClaimedDelivery, nextAt: number): Promise<void> {
    await this.scripts.reschedule(
      [this.due(d.endpoint), this.key('attempts')],
      [d.eventId, String(d.leaseUntil), d.endpoint, String(nextAt), '1'],
    );
  }

  async release(d: ClaimedDelivery, now: number): Promise<void> {
    await this.scripts.reschedule(
      [this.due(d.endpoint), this.key('attempts')],
      [d.eventId, String(d.leaseUntil), d.endpoint, String(now), '0'],
    );
  }

  async size(): Promise<number> {
    return this.redis.zcard(this.key('order'));
  }

  /** The client is the caller's. */
  close(): void {}
}
