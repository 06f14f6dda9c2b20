import Redis from 'ioredis';
import request from 'supertest';
import { useRedisPerFile } from '../../support/redis-per-file';
import { startTestProduct, type ProductHarness } from '../../support/product-harness';
import {} from '../gateway/gateway-kit';
import { adminRequest, gatewayGet } from '../admin/admin-kit';
import { MAX_AUDIT_ENTRIES, RedisAuditLog } from '../../../src/admin/audit-log';
import { LOOKBACK_DAYS, MAX_CALLERS_PER_ROUTE } from '../../../src/usage/deprecation-usage';
import { RedisDeprecationUsageStore } from '../../../src/usage/redis-deprecation-usage-store';
import { USAGE_HISTORY_DAYS, dayOf, type KeyTally } from '../../../src/usage/key-activity';
import { RedisKeyActivityStore } from '../../../src/usage/redis-key-activity-store';
import { RedisKeyLimiter } from '../../../src/limits/redis/redis-key-limiter';
import { monthSpan } from '../../../src/limits/windows/month-window';
import { DAY_MS, EXPIRY_SLACK_MS, MINUTE_MS, banPolicy } from '../../../src/limits/windows/windows';
import { ManualClock } from '../../../src/shared/clock';
import type { BanSettings } from '../../../src/limits/types';
import { MAX_KEYS_PER_MINUTE, TOP_KEYS_KEPT_MINUTES } from '../../../src/usage/top-keys';
import { USAGE_EXPORT_DAYS } from '../../../src/usage/key-activity';
import { WebhookReceiver } from '../../support/webhook-receiver';
import { eventually } from '../../support/eventually';
import { createKey } from '../../support/keys';

/**
 * Every key the gateway writes to Redis has a bound (issue 18): a TTL no longer than its design
 * needs, or a documented reason to live forever together with the count that bounds it. The whole
 * product runs against a private redis-server, every flow that writes is driven, and then the
 * keyspace is listed: a key no rule names, a key without its TTL, or a structure past its bound fails
 * the test by name. The last test measures what a key costs, for the README's sizing section.
 */

const FIXED = 'asg:fixed';
const SLIDING = 'asg:sliding';
const HISTORY = 'asg:history';
const SIZING = 'asg:sizing';
const SIZING_SLIDING = 'asg:sizing-sliding';
const DEPRECATED_ROUTE = 'GET /v1/pets/{petId}';
/** Redis rounds TIME to the millisecond and reads its clock once per command; this test reads Date.now. */
const CLOCK_READ_TOLERANCE_MS = 20;
const BAN: BanSettings = { threshold: 2, windowSeconds: 60, durationSeconds: 900 };

const redis = useRedisPerFile();
let superuser: Redis;
const running: ProductHarness[] = [];
/** A webhook receiver that refuses everything, so the outbox keeps its events and their attempts. */
let refusingReceiver: WebhookReceiver;
/** The bound of the outbox's events (config notifications.outboxMaxEvents, default). */
const OUTBOX_MAX_EVENTS = 100_000;

beforeAll(async () => {
  superuser = new Redis(redis.port, '127.0.0.1');
  refusingReceiver = await new WebhookReceiver().start();
  refusingReceiver.behaviour = () => 500;
});

afterAll(async () => {
  for (const product of running.splice(0)) await product.close();
  superuser?.disconnect();
  await refusingReceiver?.stop();
});

async function startProduct(namespace: string, minuteWindow: 'fixed' | 'sliding' = 'fixed'): Promise<ProductHarness> {
  const product = await startTestProduct({
    namespace,
    overrides: {
      redis: { url: redis.url },
      ban: BAN,
      rateLimit: { minuteWindow },
      notifications: { webhooks: [{ url: refusingReceiver.url, secret: refusingReceiver.secret }] },
    },
  });
  running.push(product);
  return product;
}

/** Closing flushes what is batched off the request path: usage history, last use, deprecated callers. */
async function stop(product: ProductHarness): Promise<void> {
  running.splice(running.indexOf(product), 1);
  await product.close();
}

function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

function endOfUtcDay(now: number): number {
  return (Math.floor(now / DAY_MS) + 1) * DAY_MS;
}

/** Key ids stored in the namespace's by-id index. */
async function keyIdsOf(namespace: string): Promise<Set<string>> {
  return new Set(await superuser.hkeys(`${namespace}:keys:{k}:by-id`));
}

/** A structure whose every member is a key id: its bound is the number of keys, and no stray member. */
async function membersAreKeyIds(namespace: string, key: string): Promise<string[]> {
  const ids = await keyIdsOf(namespace);
  const members = await superuser.zrange(key, '0', '-1');
  const strays = members.filter((member) => !ids.has(member));
  return strays.length === 0 ? [] : [`${key}: members that are not key ids: ${strays.join(', ')}`];
}

/** Redis's own count of the memory it uses (what `maxmemory` is compared with). */
async function usedMemory(): Promise<number> {
  const info = await superuser.info('memory');
  return Number(/^used_memory:(\d+)/m.exec(info)![1]);
}

/** Bytes one key takes, values and overhead included, every element counted (SAMPLES 0). */
async function memoryUsage(key: string): Promise<number> {
  return Number(await superuser.call('MEMORY', 'USAGE', key, 'SAMPLES', '0'));
}

async function encodingOf(key: string): Promise<string> {
  return String(await superuser.call('OBJECT', 'ENCODING', key));
}

/** Runs `task(0..count-1)` with at most `limit` in flight; results in order. */
async function inParallel<T>(count: number, limit: number, task: (i: number) => Promise<T>): Promise<T[]> {
  const results = new Array<T>(count);
  let next = 0;
  const worker = async () => {
    while (next < count) {
      const i = next++;
      results[i] = await task(i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, count) }, worker));
  return results;
}

function average(values: number[]): number {
  return values.reduce((sum, v) => sum + v, 0) / values.length;
}

function fakeKeyId(i: number): string {
  return `key_${i.toString(16).padStart(24, '0')}`;
}

interface KeyRule {
  /** The key's name as the README would write it. */
  pattern: string;
  match: RegExp;
  type: 'hash' | 'zset' | 'stream' | 'string';
  /** The longest PTTL the design allows, computed just before the key's PTTL is read. */
  maxTtlMs?: () => number;
  /** Why the key has no TTL; `bound` then asserts what does bound it. */
  forever?: string;
  /** Further checks (a count, a cap, field names); returns violations. */
  bound?: (key: string) => Promise<string[]>;
  /** Why the drive below does not leave this key behind (it is still checked whenever it is there). */
  absentAfterTheDrive?: string;
}

/**
 * The webhook outbox (src/notifications/redis-outbox.ts): no TTL (an event waits until delivered,
 * for at least a day of retries), bounded by notifications.outboxMaxEvents and emptied by delivery.
 */
function outboxRules(ns: string): KeyRule[] {
  const prefix = `${ns}:webhooks:\\{outbox\\}`;
  const events = (key: string) => key.replace(/:[^:]+$/, ':events');
  const atMostEvents = async (key: string, count: number) => {
    const waiting = await superuser.hlen(events(key));
    return count <= Math.max(waiting, 0) && waiting <= OUTBOX_MAX_EVENTS
      ? []
      : [`${key}: ${count} entries for ${waiting} waiting events (bound ${OUTBOX_MAX_EVENTS})`];
  };
  return [
    {
      pattern: '<ns>:webhooks:{outbox}:events',
      match: new RegExp(`^${prefix}:events$`),
      type: 'hash',
      forever:
        'webhook events waiting for a receiver: at most notifications.outboxMaxEvents (the oldest dropped past it), each removed once delivered or given up',
      bound: async (key) => atMostEvents(key, await superuser.hlen(key)),
    },
    {
      pattern: '<ns>:webhooks:{outbox}:order',
      match: new RegExp(`^${prefix}:order$`),
      type: 'zset',
      forever: 'the waiting events by age, for the bound: one member per waiting event',
      bound: async (key) => atMostEvents(key, await superuser.zcard(key)),
    },
    {
      pattern: '<ns>:webhooks:{outbox}:left',
      match: new RegExp(`^${prefix}:left$`),
      type: 'hash',
      forever: 'deliveries not finished of each waiting event: one field per waiting event',
      bound: async (key) => atMostEvents(key, await superuser.hlen(key)),
    },
    {
      pattern: '<ns>:webhooks:{outbox}:attempts',
      match: new RegExp(`^${prefix}:attempts$`),
      type: 'hash',
      forever: 'attempts made of each waiting delivery: one field per receiver of a waiting event',
      bound: async (key) => {
        const ids = new Set(await superuser.hkeys(events(key)));
        const strays = (await superuser.hkeys(key)).filter((field) => !ids.has(field.split(' ')[1]!));
        return strays.length === 0 ? [] : [`${key}: attempts of events no longer waiting: ${strays.join(', ')}`];
      },
    },
    {
      pattern: '<ns>:webhooks:{outbox}:seen',
      match: new RegExp(`^${prefix}:seen$`),
      type: 'zset',
      forever:
        'ids of the events added, each until its period ends plus a day (a month and a day at most), pruned on every add',
      bound: async (key) => {
        const late = await superuser.zcount(key, `(${Date.now() + 33 * DAY_MS}`, '+inf');
        return late === 0 ? [] : [`${key}: ${late} ids kept more than a month and a day`];
      },
    },
    {
      pattern: '<ns>:webhooks:{outbox}:due:<receiver>',
      match: new RegExp(`^${prefix}:due:[0-9a-f]{16}$`),
      type: 'zset',
      forever: "one receiver's waiting deliveries by when they are due: one member per waiting event",
      bound: async (key) => {
        const ids = new Set(await superuser.hkeys(key.replace(/:due:[0-9a-f]{16}$/, ':events')));
        const strays = (await superuser.zrange(key, '0', '-1')).filter((id) => !ids.has(id));
        return strays.length === 0 ? [] : [`${key}: deliveries of events no longer waiting: ${strays.join(', ')}`];
      },
    },
    {
      pattern: '<ns>:webhooks:{outbox}:receivers',
      match: new RegExp(`^${prefix}:receivers$`),
      type: 'hash',
      forever:
        'the receivers that have (or had, until the next naming) a due set: one field per receiver, so at most the receivers configured',
      bound: async (key) => {
        const strays = Object.entries(await superuser.hgetall(key)).filter(
          ([field, value]) => !/^[0-9a-f]{16}$/.test(field) || value !== '1',
        );
        return strays.length === 0
          ? []
          : [`${key}: fields that name no receiver: ${strays.map(([f]) => f).join(', ')}`];
      },
    },
    {
      pattern: '<ns>:webhooks:{outbox}:instances',
      match: new RegExp(`^${prefix}:instances$`),
      type: 'hash',
      forever:
        'the receivers each running process names: one field per process, removed when it stops or 60 s after its last word',
      absentAfterTheDrive: 'the products stopped before the audit, and a process that stops removes its field',
      bound: async (key) => {
        const late = Object.entries(await superuser.hgetall(key)).filter(
          ([, value]) => !(Number(value.split(' ')[0]) <= Date.now() + 61_000),
        );
        return late.length === 0
          ? []
          : [`${key}: processes named for more than 60 s: ${late.map(([f]) => f).join(', ')}`];
      },
    },
    {
      pattern: '<ns>:webhooks:{outbox}:receivers-indexed',
      match: new RegExp(`^${prefix}:receivers-indexed$`),
      type: 'string',
      forever: 'a mark, set once: the events of an outbox from before the receivers hash have been read into it',
      absentAfterTheDrive: 'set only on an outbox written before the receivers hash existed',
    },
  ];
}

/**
 * Every key the gateway may write in `namespace`. A new key pattern must be added here, with its TTL
 * or with the reason it lives forever and the check of what bounds it.
 */
function keyRules(namespace: string, ban: BanSettings): KeyRule[] {
  const ns = escape(namespace);
  const { retainMs } = banPolicy(ban);
  const keyId = 'key_[0-9a-f]{24}';
  return [
    {
      pattern: '<ns>:keys:{k}:by-hash',
      match: new RegExp(`^${ns}:keys:\\{k\\}:by-hash$`),
      type: 'hash',
      forever: 'the key records: a key is never deleted (a revoked one answers revoked_api_key for good)',
      bound: async (key) => {
        // One entry per key under its current hash, and one more for a rotated key's previous hash.
        const entries = await superuser.hgetall(key);
        const ids = await keyIdsOf(namespace);
        const violations: string[] = [];
        const current = new Set<string>();
        for (const [hash, json] of Object.entries(entries)) {
          const record = JSON.parse(json) as { id: string; hash: string; previousHash: string | null };
          if (!ids.has(record.id)) violations.push(`${key}: record ${record.id} is not in by-id`);
          if (record.hash === hash) current.add(record.id);
          else if (record.previousHash !== hash)
            violations.push(`${key}: ${record.id} sits under a hash that is neither its current nor its previous one`);
        }
        if (current.size !== ids.size)
          violations.push(`${key}: ${current.size} records under their current hash, ${ids.size} key ids`);
        if (Object.keys(entries).length > 2 * ids.size)
          violations.push(`${key}: ${Object.keys(entries).length} entries for ${ids.size} keys`);
        return violations;
      },
    },
    {
      pattern: '<ns>:keys:{k}:by-id',
      match: new RegExp(`^${ns}:keys:\\{k\\}:by-id$`),
      type: 'hash',
      forever: 'the index of the key records, one entry per key',
      // Its count is the number of keys; by-hash checks the two indexes agree.
    },
    {
      pattern: '<ns>:keys:{k}:epoch',
      match: new RegExp(`^${ns}:keys:\\{k\\}:epoch$`),
      type: 'string',
      forever:
        'the marker that tells an empty Redis from a new one (docs/disaster-recovery.md): one short string per namespace',
      bound: async (key) => {
        const length = await superuser.strlen(key);
        return length <= 64 ? [] : [`${key}: ${length} bytes`];
      },
    },
    {
      pattern: '<ns>:keys:{k}:issued',
      match: new RegExp(`^${ns}:keys:\\{k\\}:issued$`),
      type: 'hash',
      forever: 'the issued-key mark (epoch, seq) every instance compares its filter of issued hashes with: two fields',
      bound: async (key) => {
        const fields = (await superuser.hkeys(key)).sort();
        return fields.join(',') === 'epoch,seq' ? [] : [`${key}: fields ${fields.join(',')}, not epoch,seq`];
      },
    },
    {
      pattern: '<ns>:keys:{k}:writes',
      match: new RegExp(`^${ns}:keys:\\{k\\}:writes$`),
      type: 'string',
      forever:
        "the loss check's counter of records ever written (docs/disaster-recovery.md): one integer per namespace",
      bound: async (key) => {
        const value = await superuser.get(key);
        return /^\d{1,15}$/.test(value ?? '') ? [] : [`${key}: ${value} is not a counter`];
      },
    },
    {
      pattern: '<ns>:consumers:{c}:epoch',
      match: new RegExp(`^${ns}:consumers:\\{c\\}:epoch$`),
      type: 'string',
      forever:
        "the consumers' loss-check marker, set at start as the keys' is (docs/disaster-recovery.md): one short string per namespace",
      bound: async (key) => {
        const length = await superuser.strlen(key);
        return length <= 64 ? [] : [`${key}: ${length} bytes`];
      },
    },
    {
      pattern: '<ns>:consumers:{c}:by-id',
      match: new RegExp(`^${ns}:consumers:\\{c\\}:by-id$`),
      type: 'hash',
      forever: 'the consumer records, one entry per consumer',
      absentAfterTheDrive: 'the drive writes no consumer',
    },
    {
      pattern: '<ns>:consumers:{c}:deleted',
      match: new RegExp(`^${ns}:consumers:\\{c\\}:deleted$`),
      type: 'hash',
      forever: 'one short entry per consumer ever deleted, so a durable copy never puts one back',
      absentAfterTheDrive: 'the drive deletes no consumer',
    },
    {
      pattern: '<ns>:consumers:{c}:writes',
      match: new RegExp(`^${ns}:consumers:\\{c\\}:writes$`),
      type: 'string',
      forever: "the consumers' loss-check counter of writes: one integer per namespace",
      absentAfterTheDrive: 'the drive writes no consumer',
      bound: async (key) => {
        const value = await superuser.get(key);
        return /^\d{1,15}$/.test(value ?? '') ? [] : [`${key}: ${value} is not a counter`];
      },
    },
    {
      pattern: '<ns>:keys:{k}:last-used',
      match: new RegExp(`^${ns}:keys:\\{k\\}:last-used$`),
      type: 'zset',
      forever: "each key's lastUsedAt (GET /admin/keys), kept as long as the key: one member per key id (ZADD GT)",
      bound: (key) => membersAreKeyIds(namespace, key),
    },
    {
      pattern: '<ns>:rl:bans',
      match: new RegExp(`^${ns}:rl:bans$`),
      type: 'zset',
      forever:
        'the gateway_active_bans gauge: one member per banned key id; ended bans are dropped on every scrape and on unban',
      bound: (key) => membersAreKeyIds(namespace, key),
    },
    {
      pattern: '<ns>:audit',
      match: new RegExp(`^${ns}:audit$`),
      type: 'stream',
      forever: `the audit trail (GET /admin/audit): a stream capped by XADD MAXLEN at the last ${MAX_AUDIT_ENTRIES} entries`,
      bound: async (key) => {
        const length = await superuser.xlen(key);
        return length <= MAX_AUDIT_ENTRIES ? [] : [`${key}: ${length} entries, more than ${MAX_AUDIT_ENTRIES}`];
      },
    },
    {
      // Minute and day counters, refusals toward a ban and the ban: the day window plus the longest
      // refusal window or ban that may start before the day ends.
      pattern: '<ns>:rl:{<key id>}',
      match: new RegExp(`^${ns}:rl:\\{${keyId}\\}$`),
      type: 'hash',
      maxTtlMs: () => endOfUtcDay(Date.now()) - Date.now() + retainMs,
    },
    {
      // The sliding minute's log of admissions: a minute past the last one.
      pattern: '<ns>:rl:{<key id>}:log',
      match: new RegExp(`^${ns}:rl:\\{${keyId}\\}:log$`),
      type: 'zset',
      maxTtlMs: () => MINUTE_MS + EXPIRY_SLACK_MS,
    },
    {
      // A month window's count and credits: to the end of the key's billing month (the flow's only
      // month key is billed on the 15th) plus the slack every expiry has, never longer.
      pattern: '<ns>:rl:{<key id>}:mo',
      match: new RegExp(`^${ns}:rl:\\{${keyId}\\}:mo$`),
      type: 'hash',
      maxTtlMs: () => monthSpan(Date.now(), FLOW_BILLING_DAY).end - Date.now() + EXPIRY_SLACK_MS,
    },
    {
      // rate-limiter-flexible's per-address counter for requests without a valid key: one window.
      pattern: '<ns>:rl:addr:<client address>',
      match: new RegExp(`^${ns}:rl:addr:[0-9a-fA-F.:]+$`),
      type: 'string',
      maxTtlMs: () => MINUTE_MS,
    },
    {
      pattern: '<ns>:key-usage:{<key id>}',
      match: new RegExp(`^${ns}:key-usage:\\{${keyId}\\}$`),
      type: 'hash',
      maxTtlMs: () => (USAGE_HISTORY_DAYS + 1) * DAY_MS,
      bound: async (key) => {
        // Fields `<day>:a|r|b` of the last 90 UTC days only, and `pruned`, the day they were cleared through.
        const oldest = dayOf(Date.now()) - USAGE_HISTORY_DAYS + 1;
        const fields = (await superuser.hkeys(key)).filter((field) => field !== 'pruned');
        const stale = fields.filter((field) => !/^\d+:[arb]$/.test(field) || Number(field.split(':')[0]) < oldest);
        return stale.length === 0
          ? []
          : [`${key}: fields outside the ${USAGE_HISTORY_DAYS}-day history: ${stale.join(', ')}`];
      },
    },
    {
      // The usage export's ledger: one hash per key and UTC month, a field per day of that month,
      // expiring USAGE_EXPORT_DAYS after the month ends (counted from the start of the day written).
      pattern: '<ns>:key-usage:{<key id>}:<yyyy-mm>',
      match: new RegExp(`^${ns}:key-usage:\\{${keyId}\\}:\\d{4}-\\d\\d$`),
      type: 'hash',
      maxTtlMs: () => (USAGE_EXPORT_DAYS + 32) * DAY_MS,
      bound: async (key) => {
        const month = key.slice(-7);
        const fields = await superuser.hgetall(key);
        const stray = Object.entries(fields).filter(
          ([day, value]) =>
            new Date(Number(day) * DAY_MS).toISOString().slice(0, 7) !== month || !/^\d+ \d+ \d+ \d+ \d+$/.test(value),
        );
        return stray.length === 0
          ? []
          : [`${key}: fields of another month or not five counts: ${stray.map(([d, v]) => `${d}=${v}`).join(', ')}`];
      },
    },
    ...[':limited', ''].map((suffix) => ({
      // The busiest keys: per minute, each instance's batched counts; an hour and a minute kept.
      pattern: `<ns>:top-keys:{t}:<minute>${suffix}`,
      match: new RegExp(`^${ns}:top-keys:\\{t\\}:\\d+${suffix}$`),
      type: 'zset' as const,
      maxTtlMs: () => TOP_KEYS_KEPT_MINUTES * MINUTE_MS,
      bound: async (key: string) => {
        const count = await superuser.zcard(key);
        return [
          ...(count > MAX_KEYS_PER_MINUTE ? [`${key}: ${count} members, more than ${MAX_KEYS_PER_MINUTE}`] : []),
          ...(await membersAreKeyIds(namespace, key)),
        ];
      },
    })),
    ...outboxRules(ns),
    {
      pattern: '<ns>:deprecated:{<route>}:last',
      match: new RegExp(`^${ns}:deprecated:\\{[A-Z]+ /[^\\s]*\\}:last$`),
      type: 'zset',
      maxTtlMs: () => (LOOKBACK_DAYS + 1) * DAY_MS,
      bound: async (key) => {
        const callers = await superuser.zcard(key);
        return callers <= MAX_CALLERS_PER_ROUTE
          ? []
          : [`${key}: ${callers} callers, more than ${MAX_CALLERS_PER_ROUTE}`];
      },
    },
    {
      pattern: '<ns>:deprecated:{<route>}:day:<day>',
      match: new RegExp(`^${ns}:deprecated:\\{[A-Z]+ /[^\\s]*\\}:day:\\d+$`),
      type: 'hash',
      maxTtlMs: () => (LOOKBACK_DAYS + 1) * DAY_MS,
    },
  ];
}

interface KeyspaceAudit {
  /** Every key found, by namespace. */
  keys: string[];
  /** Keys per rule pattern, and the longest PTTL seen (-1: none). */
  seen: Map<string, { count: number; maxPttl: number }>;
  /** Each names its key: unknown, without TTL, TTL too long, wrong type, past its bound. */
  violations: string[];
}

async function scanNamespace(namespace: string): Promise<string[]> {
  const keys: string[] = [];
  let cursor = '0';
  do {
    const [next, batch] = await superuser.scan(cursor, 'MATCH', `${namespace}:*`, 'COUNT', 1000);
    keys.push(...batch);
    cursor = next;
  } while (cursor !== '0');
  return [...new Set(keys)].sort();
}

async function auditKeyspace(namespaces: string[], ban: BanSettings = BAN): Promise<KeyspaceAudit> {
  const audit: KeyspaceAudit = { keys: [], seen: new Map(), violations: [] };
  for (const namespace of namespaces) {
    const rules = keyRules(namespace, ban);
    for (const key of await scanNamespace(namespace)) {
      audit.keys.push(key);
      const rule = rules.find((r) => r.match.test(key));
      const type = await superuser.type(key);
      if (!rule) {
        audit.violations.push(
          `${key}: no rule names this key (type ${type}, PTTL ${await superuser.pttl(key)}): give it a TTL, or a reason and a bound here`,
        );
        continue;
      }
      if (type !== rule.type) audit.violations.push(`${key}: a ${type}, expected a ${rule.type}`);
      const maxTtlMs = rule.maxTtlMs?.();
      const pttl = await superuser.pttl(key);
      if (maxTtlMs !== undefined) {
        if (pttl < 0) audit.violations.push(`${key}: no TTL (PTTL ${pttl}); its design bound is ${maxTtlMs} ms`);
        else if (pttl > maxTtlMs + CLOCK_READ_TOLERANCE_MS)
          audit.violations.push(`${key}: PTTL ${pttl} ms, longer than its design bound ${maxTtlMs} ms`);
      } else if (pttl !== -1) {
        audit.violations.push(`${key}: allow-listed to live forever (${rule.forever}) but has PTTL ${pttl}`);
      }
      if (rule.bound) audit.violations.push(...(await rule.bound(key)));
      const seen = audit.seen.get(rule.pattern) ?? { count: 0, maxPttl: -1 };
      audit.seen.set(rule.pattern, { count: seen.count + 1, maxPttl: Math.max(seen.maxPttl, pttl) });
    }
  }
  return audit;
}

function formatDuration(ms: number): string {
  if (ms < 0) return 'none';
  if (ms < 2 * MINUTE_MS) return `${(ms / 1000).toFixed(1)} s`;
  if (ms < 2 * DAY_MS) return `${(ms / 3_600_000).toFixed(2)} h`;
  return `${(ms / DAY_MS).toFixed(2)} d`;
}

/** Requests with `key` until it is banned; returns the codes seen (the minute may roll over meanwhile). */
async function driveUntilBanned(product: ProductHarness, key: string): Promise<string[]> {
  const codes: string[] = [];
  for (let i = 0; i < 30; i++) {
    const res = await gatewayGet(product, key);
    codes.push(res.status === 200 ? 'ok' : (res.body as { code: string }).code);
    if (codes.at(-1) === 'temporarily_banned') return codes;
  }
  throw new Error(`key was never banned: ${codes.join(', ')}`);
}

/** The billing day of the flow's key with a month quota. */
const FLOW_BILLING_DAY = 15;

/** Every flow that writes to Redis, through the admin API and the gateway as a client would use them. */
async function driveEveryFlow(product: ProductHarness): Promise<void> {
  // Key A: created, renamed, rotated (both secrets count on one key), limited, banned, unbanned.
  const a = await createKey(
    product,
    { name: 'keyspace a', plan: 'free', limits: { perMinute: 2, perDay: 100 } },
    { overApi: true },
  );
  await adminRequest(product, 'patch', `/admin/keys/${a.id}`).send({ name: 'keyspace a, renamed' }).expect(200);
  const rotated = (
    await adminRequest(product, 'post', `/admin/keys/${a.id}/rotate`).send({ graceSeconds: 3600 }).expect(201)
  ).body as { key: string };
  await gatewayGet(product, a.key).expect(200);
  const codesA = await driveUntilBanned(product, rotated.key);
  expect(codesA).toContain('rate_limited');
  await adminRequest(product, 'delete', `/admin/keys/${a.id}/ban`).expect(204);
  expect((await adminRequest(product, 'get', `/admin/keys/${a.id}`).expect(200)).body.bannedUntil).toBeNull();

  // Key B: banned, and left banned, so the active-bans set holds a member.
  const b = await createKey(
    product,
    { name: 'keyspace b', plan: 'pro', limits: { perMinute: 1, perDay: 100 } },
    { overApi: true },
  );
  expect(await driveUntilBanned(product, b.key)).toContain('ok');
  const bansKey = `${product.config.redis.namespace}:rl:bans`;
  await eventually(async () => (await superuser.zscore(bansKey, b.id)) !== null, { timeoutMs: 2000 });

  // Key C: calls the deprecated GET /v1/pets/{petId}, then is revoked.
  const c = await createKey(product, { name: 'keyspace c', plan: 'pro' }, { overApi: true });
  const deprecated = await gatewayGet(product, c.key, '/v1/pets/1');
  expect(deprecated.headers.deprecation).toEqual(expect.any(String));
  await adminRequest(product, 'delete', `/admin/keys/${c.id}`).expect(204);
  expect((await gatewayGet(product, c.key).expect(401)).body.code).toBe('revoked_api_key');

  // Key D: a month quota of its own, billed on the 15th, used and given credits.
  const d = (
    await adminRequest(product, 'post', '/admin/keys')
      .send({
        name: 'keyspace d',
        plan: 'enterprise',
        limits: { perMinute: 50, perDay: 100, perMonth: 1000 },
        billingDay: FLOW_BILLING_DAY,
      })
      .expect(201)
  ).body as { id: string; key: string };
  await gatewayGet(product, d.key).expect(200);
  await adminRequest(product, 'post', `/admin/keys/${d.id}/credits`).send({ units: 10 }).expect(200);

  // Key E: one a day, so its one request passes 80, 90 and 100 % at once: three webhook events,
  // each refused by the receiver and left waiting in the outbox with its attempt counted.
  const e = await createKey(
    product,
    { name: 'keyspace e', plan: 'free', limits: { perMinute: 10, perDay: 1 } },
    { overApi: true },
  );
  await gatewayGet(product, e.key).expect(200);
  const attemptsKey = `${product.config.redis.namespace}:webhooks:{outbox}:attempts`;
  await eventually(async () => (await superuser.hlen(attemptsKey)) >= 3, { timeoutMs: 10_000 });

  // An unknown key: counted per client address.
  expect(
    (await request(product.gatewayUrl).get('/v1/pets').set('Authorization', 'Bearer asg_dev_unknown')).status,
  ).toBe(401);

  // The admin reads that touch Redis: last use, usage history, audit, deprecations, the bans gauge.
  const listed = (await adminRequest(product, 'get', '/admin/keys').expect(200)).body as Array<{
    id: string;
    lastUsedAt: string | null;
  }>;
  expect(listed.find((k) => k.id === a.id)?.lastUsedAt).toEqual(expect.any(String));
  const usage = (await adminRequest(product, 'get', `/admin/keys/${a.id}/usage?days=1`).expect(200)).body as {
    days: Array<{ admitted: number; rateLimited: number; banned: number }>;
  };
  expect(usage.days[0]).toEqual({
    date: expect.any(String),
    admitted: expect.any(Number),
    rateLimited: expect.any(Number),
    banned: expect.any(Number),
  });
  expect(usage.days[0]!.rateLimited).toBeGreaterThan(0);
  const audit = (await adminRequest(product, 'get', '/admin/audit').expect(200)).body as {
    entries: Array<{ action: string }>;
  };
  expect(new Set(audit.entries.map((e) => e.action))).toEqual(
    new Set(['create', 'update', 'rotate', 'unban', 'revoke', 'credits']),
  );
  const report = (await adminRequest(product, 'get', '/admin/deprecations').expect(200)).text;
  expect(report).toContain(c.id);
  expect((await request(product.adminUrl).get('/metrics').expect(200)).text).toMatch(/^gateway_active_bans 1$/m);
}

// Test timeouts are hang guards (docs/testing.md): the flows start several products; at load average 30
// the first test outlasted 60 s.
describe('the Redis keyspace', () => {
  it('after traffic through every flow that writes, every key has a TTL within its design or is an allow-listed bounded structure', async () => {
    const fixed = await startProduct(FIXED);
    const sliding = await startProduct(SLIDING, 'sliding');
    await Promise.all([driveEveryFlow(fixed), driveEveryFlow(sliding)]);
    await Promise.all([stop(fixed), stop(sliding)]);

    const audit = await auditKeyspace([FIXED, SLIDING]);
    console.log(
      'Redis keyspace after every flow (fixed and sliding minute):\n' +
        keyRules('<ns>', BAN)
          .map((rule) => {
            const seen = audit.seen.get(rule.pattern);
            const bound = rule.forever ? `no TTL: ${rule.forever}` : `TTL ≤ ${formatDuration(rule.maxTtlMs!())}`;
            return `  ${rule.pattern.padEnd(36)} ${String(seen?.count ?? 0).padStart(2)} key(s), longest PTTL ${formatDuration(seen?.maxPttl ?? -1).padEnd(8)} ${bound}`;
          })
          .join('\n'),
    );
    expect(audit.violations).toEqual([]);
    // The drive reached every writer: each rule names at least one key it wrote.
    expect(
      keyRules('<ns>', BAN)
        .filter((r) => r.absentAfterTheDrive === undefined)
        .map((r) => r.pattern)
        .filter((p) => !audit.seen.has(p)),
    ).toEqual([]);
    // Nothing outside the two namespaces.
    expect(((await superuser.keys('*')) as string[]).sort()).toEqual(audit.keys.sort());
  }, 240_000);

  it(`a key used at any rhythm keeps no usage day older than the ${USAGE_HISTORY_DAYS}-day history`, async () => {
    // The usage hash expires 91 days after its last flush, so a key used at least that often keeps
    // it for good: each flush must drop every day that fell out of the history since the last one,
    // whatever the gap. Gaps of 11, 14, 17, 20 days once let old days stay for as long as the key lived.
    const store = new RedisKeyActivityStore(superuser, HISTORY);
    const keyId = 'key_000000000000000000000001';
    const usageKey = `${HISTORY}:key-usage:{${keyId}}`;
    const gaps = [
      20, 20, 20, 20, 20, 20, 14, 14, 14, 14, 11, 11, 11, 17, 17, 17, 91, 0, 1, 45, 91, 3, 25, 25, 25, 25, 0,
    ];
    let day = dayOf(Date.now()) - gaps.reduce((sum, gap) => sum + gap, 0);
    const tally: KeyTally = { admitted: 2, rateLimited: 1, banned: 1, lastUsedAt: 0, units: 2, dayCount: 2 };
    const flushedDays: number[] = [];
    const stale = new Set<string>();
    for (const gap of [0, ...gaps]) {
      day += gap;
      await store.add(day, new Map([[keyId, { ...tally, lastUsedAt: day * DAY_MS }]]));
      flushedDays.push(day);
      for (const field of await superuser.hkeys(usageKey)) {
        if (/^\d+:/.test(field) && Number(field.split(':')[0]) <= day - USAGE_HISTORY_DAYS)
          stale.add(`${field} (still there on day ${day})`);
      }
    }
    expect([...stale]).toEqual([]);
    // What is left is exactly the days of the history that had traffic, and the day they were cleared through.
    const kept = [...new Set(flushedDays)].filter((d) => d > day - USAGE_HISTORY_DAYS);
    expect((await superuser.hkeys(usageKey)).sort()).toEqual(
      [...kept.flatMap((d) => [`${d}:a`, `${d}:b`, `${d}:r`]), 'pruned'].sort(),
    );
    expect(await superuser.hget(usageKey, 'pruned')).toBe(String(day - USAGE_HISTORY_DAYS));
    const history = await store.days(keyId, day - USAGE_HISTORY_DAYS + 1, day);
    expect(history.filter((d) => d.admitted > 0)).toHaveLength(kept.length);
    expect(history.at(-1)).toEqual({ admitted: 4, rateLimited: 2, banned: 2 });
    await superuser.del(usageKey, `${HISTORY}:keys:{k}:last-used`);
  });

  it('what a key costs in Redis, at rest and while active: figures for the README sizing section', async () => {
    const KEYS = 1000;
    const ns = SIZING;
    const memoryBefore = await usedMemory();

    // 1,000 keys, no traffic yet: the records and their two indexes.
    let product = await startProduct(ns);
    const created = await inParallel(KEYS, 50, (i) =>
      product.keyService.create({ name: `sizing key ${i}`, plan: 'free' }),
    );
    await stop(product);
    const memoryAtCreation = await usedMemory();

    // One admitted request per key: its limiter hash, its first day of history, its last use.
    product = await startProduct(ns);
    const statuses = await inParallel(KEYS, 50, async (i) => {
      const res = await fetch(`${product.gatewayUrl}/v1/pets`, {
        headers: { authorization: `Bearer ${created[i]!.key}` },
      });
      await res.arrayBuffer();
      return res.status;
    });
    expect(statuses.filter((status) => status !== 200)).toEqual([]);
    // An anonymous request, and one admin write for a real audit entry.
    expect(
      (await request(product.gatewayUrl).get('/v1/pets').set('Authorization', 'Bearer asg_dev_unknown')).status,
    ).toBe(401);
    await createKey(product, { name: 'sizing audit entry', plan: 'pro' }, { overApi: true });
    await stop(product);
    const memoryAfterTraffic = await usedMemory();

    const records = (await memoryUsage(`${ns}:keys:{k}:by-hash`)) / (KEYS + 1);
    const byId = (await memoryUsage(`${ns}:keys:{k}:by-id`)) / (KEYS + 1);
    const lastUsed = (await memoryUsage(`${ns}:keys:{k}:last-used`)) / KEYS;
    const recordJson = average(
      Object.values(await superuser.hgetall(`${ns}:keys:{k}:by-hash`)).map((json) => Buffer.byteLength(json)),
    );
    const keys = await scanNamespace(ns);
    const limiterHashes = keys.filter((key) => /:rl:\{key_[0-9a-f]+\}$/.test(key));
    const usageHashes = keys.filter((key) => /:key-usage:\{[^}]+\}$/.test(key));
    expect([limiterHashes.length, usageHashes.length]).toEqual([KEYS, KEYS]);
    const fixedWindow = average(await Promise.all(limiterHashes.map(memoryUsage)));
    const usageOneDay = average(await Promise.all(usageHashes.map(memoryUsage)));
    const addressKeys = keys.filter((key) => key.includes(':rl:addr:'));
    expect(addressKeys).toHaveLength(1);
    const address = await memoryUsage(addressKeys[0]!);

    // A full history: 90 days of admitted requests only, and 90 days with all three counts.
    const history = new RedisKeyActivityStore(superuser, ns);
    const today = dayOf(Date.now());
    const [admittedOnly, allOutcomes] = [created[0]!.record.id, created[1]!.record.id];
    for (let day = today - USAGE_HISTORY_DAYS + 1; day < today; day++) {
      await history.add(
        day,
        new Map([
          [admittedOnly, { admitted: 500, rateLimited: 0, banned: 0, lastUsedAt: 0, units: 500, dayCount: 500 }],
          [allOutcomes, { admitted: 500, rateLimited: 20, banned: 3, lastUsedAt: 0, units: 500, dayCount: 500 }],
        ]),
      );
    }
    const usage90Admitted = await memoryUsage(`${ns}:key-usage:{${admittedOnly}}`);
    const usage90All = await memoryUsage(`${ns}:key-usage:{${allOutcomes}}`);
    // The same 90 days in the usage export's ledger: one hash per UTC month.
    const ledgers = (await scanNamespace(ns)).filter((key) => key.startsWith(`${ns}:key-usage:{${allOutcomes}}:`));
    const ledger90 = (await Promise.all(ledgers.map(memoryUsage))).reduce((sum, bytes) => sum + bytes, 0);
    const ledgerEncoding = await encodingOf(ledgers[0]!);

    // The sliding minute: the hash plus one log entry per admission of the last 60 s.
    const clock = new ManualClock(Date.now());
    const slidingLimiter = new RedisKeyLimiter(superuser, {
      namespace: SIZING_SLIDING,
      ban: BAN,
      minuteWindow: 'sliding',
      clock,
    });
    const sliding: Array<{ perMinute: number; hash: number; log: number; encoding: string }> = [];
    for (const [i, perMinute] of [60, 300, 1000].entries()) {
      const keyId = fakeKeyId(i);
      for (let n = 0; n < perMinute; n++) {
        expect((await slidingLimiter.consume({ keyId }, { perMinute, perDay: 100_000 })).outcome).toBe('allowed');
        clock.advance(Math.floor(50_000 / perMinute));
      }
      const base = `${SIZING_SLIDING}:rl:{${keyId}}`;
      expect(await superuser.zcard(`${base}:log`)).toBe(perMinute);
      sliding.push({
        perMinute,
        hash: await memoryUsage(base),
        log: await memoryUsage(`${base}:log`),
        encoding: await encodingOf(`${base}:log`),
      });
    }

    // The capped structures at their caps: the audit stream (copies of a real entry) and one
    // deprecated route's callers.
    const entryJson = (await superuser.xrevrange(`${ns}:audit`, '+', '-', 'COUNT', 1))[0]?.[1][1];
    expect(JSON.parse(entryJson!)).toEqual(expect.objectContaining({ action: 'create' }));
    const auditLog = new RedisAuditLog(superuser, ns);
    await inParallel(MAX_AUDIT_ENTRIES + 5, 200, () => auditLog.append(JSON.parse(entryJson!)));
    expect(await superuser.xlen(`${ns}:audit`)).toBe(MAX_AUDIT_ENTRIES);
    const auditStream = await memoryUsage(`${ns}:audit`);
    const deprecations = new RedisDeprecationUsageStore(superuser, ns);
    const callers = new Map(
      Array.from({ length: MAX_CALLERS_PER_ROUTE + 5 }, (_, i) => [
        fakeKeyId(i),
        { count: 3, lastCallAt: Date.now() - i },
      ]),
    );
    await deprecations.add(DEPRECATED_ROUTE, callers, today);
    expect(await superuser.zcard(`${ns}:deprecated:{${DEPRECATED_ROUTE}}:last`)).toBe(MAX_CALLERS_PER_ROUTE);
    const deprecatedLast = await memoryUsage(`${ns}:deprecated:{${DEPRECATED_ROUTE}}:last`);
    const deprecatedDay = await memoryUsage(`${ns}:deprecated:{${DEPRECATED_ROUTE}}:day:${today}`);

    const perKeyCreated = (memoryAtCreation - memoryBefore) / KEYS;
    const perKeyUsed = (memoryAfterTraffic - memoryAtCreation) / KEYS;
    const atRest = records + byId + lastUsed + usageOneDay;
    const perHistoryDay = (usage90Admitted - usageOneDay) / (USAGE_HISTORY_DAYS - 1);
    const perHistoryDayAll = (usage90All - usageOneDay) / (USAGE_HISTORY_DAYS - 1);
    const round = (n: number) => Math.round(n).toLocaleString('en-US');
    console.log(
      [
        `Redis memory per key (redis-server ${(await superuser.info('server')).match(/redis_version:(\S+)/)![1]}, ${KEYS} keys, MEMORY USAGE ... SAMPLES 0):`,
        `  at rest: record under its hash ${round(records)} B (record JSON ${round(recordJson)} B) + by-id ${round(byId)} B + last-used ${round(lastUsed)} B` +
          ` + usage history of one day ${round(usageOneDay)} B = ${round(atRest)} B`,
        `  INFO used_memory: +${round(perKeyCreated)} B per key created, +${round(perKeyUsed)} B per key after its first request (limiter hash, history, last use)`,
        `  usage history (TTL 91 d): 90 days admitted only ${round(usage90Admitted)} B (≈${round(perHistoryDay)} B a day); ` +
          `90 days with admitted, rate-limited and banned ${round(usage90All)} B (≈${round(perHistoryDayAll)} B a day), both ${await encodingOf(`${ns}:key-usage:{${allOutcomes}}`)}`,
        `  usage export ledger (400 days after each month): the same 90 days in ${ledgers.length} month hashes ${round(ledger90)} B (≈${round(ledger90 / USAGE_HISTORY_DAYS)} B a day), ${ledgerEncoding}`,
        `  active key, fixed minute: limiter hash ${round(fixedWindow)} B (TTL: end of its UTC day + ${BAN.durationSeconds + 1} s)`,
        ...sliding.map(
          (s) =>
            `  active key, sliding minute at ${s.perMinute}/min: hash ${round(s.hash)} B + log ${round(s.log)} B, ${s.encoding} (≈${round(s.log / s.perMinute)} B per admission of the last minute)`,
        ),
        `  anonymous client address: ${round(address)} B for 60 s`,
        `  audit stream at its cap of ${MAX_AUDIT_ENTRIES}: ${round(auditStream)} B (≈${round(auditStream / MAX_AUDIT_ENTRIES)} B an entry of ${Buffer.byteLength(entryJson!)} B JSON)`,
        `  a deprecated route's callers at the cap of ${MAX_CALLERS_PER_ROUTE}: last-call set ${round(deprecatedLast)} B + ${round(deprecatedDay)} B per day with that many callers (31 days kept)`,
      ].join('\n'),
    );

    // Generous bounds only: a regression by several times fails, allocator noise does not.
    expect(atRest).toBeLessThan(2048);
    expect(perKeyCreated).toBeLessThan(2048);
    expect(perKeyUsed).toBeLessThan(2048);
    expect(usage90All).toBeLessThan(32 * 1024);
    expect(fixedWindow).toBeLessThan(512);
    for (const s of sliding) expect(s.log / s.perMinute).toBeLessThan(256);
    expect(auditStream / MAX_AUDIT_ENTRIES).toBeLessThan(1024);

    // And the keyspace of 1,000 keys passes the same audit.
    const audit = await auditKeyspace([SIZING, SIZING_SLIDING]);
    expect(audit.violations).toEqual([]);
  }, 240_000);
});
