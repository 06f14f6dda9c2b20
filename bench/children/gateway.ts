import Redis from 'ioredis';
import { loadConfig } from '../../src/shared/config';
import { createLogger } from '../../src/shared/logger';
import { startProduct } from '../../src/product';
import { startTracing, tracing } from '../../src/shared/telemetry/telemetry';
import { announceReady, childOptions, countRequestsReceived } from '../processes';

/**
 * The whole gateway as `npm start` runs it (every feature on, logs at info to stdout, which the
 * bench sends to a file), in front of the bench's upstream. It creates its own keys:
 * - `admitted`: enterprise, limits no run can reach;
 * - `limited`: one request a day, used up here before the run, so every later request is a 429;
 * - `banned`: like `limited`, then refused past the ban threshold, so every later request is a 429 ban.
 */
interface GatewayChildOptions {
  target: string;
  redisUrl: string | null;
  namespace: string;
  forwarder: 'undici' | 'http-proxy';
  dataDir: string;
  configDir: string;
  /** Refusals before a ban; the default (config) unless the bench wants 429s that never turn into bans. */
  banThreshold?: number;
  /** Config rateLimit.minuteWindow; the default (config) unless a row measures the other shape. */
  minuteWindow?: 'fixed' | 'sliding';
  /**
   * A month window and a cost rule on (issue 28): the measured GET /v1/pets costs 2 units, and the
   * admitted key has a month quota out of reach and billing day 15, so every request also reads and
   * writes its month hash, in the same single script call.
   */
  monthAndCost?: boolean;
  /** Keys of one consumer with limits (out of reach), each request sending the next (issue 38). */
  consumerKeys?: number;
  /** Issue 41: the admitted key is the one key of a consumer (limits out of reach): the consumer's windows alone. */
  admittedInConsumer?: boolean;
  /** Issue 41: the admitted key's own maxInFlight (above the bench's connections): a lease per request. */
  maxInFlight?: number;
  /** Tracing on, exporting OTLP/protobuf to this sink with sampler parentbased_traceidratio at `ratio`. */
  tracing?: { sinkUrl: string; ratio: number };
  /** Keys issued besides `admitted` (same unreachable limits), for the round-robin row (0: none). */
  extraKeys?: number;
  /**
   * Issue 39: the admitted key carries an access policy at its largest, 100 address ranges with
   * the bench's client (127.0.0.1) in the last one, and an operation list, so every request runs
   * both checks to the end.
   */
  allowlist100?: boolean;
  /** `--instructions`: under valgrind a request takes 50x longer; upstream and Redis timeouts stretched to match (per-request work unchanged). */
  underValgrind?: boolean;
  /**
   * Config rateLimit.leases (issue 50); the default (config: on, a key leased past 50 requests a
   * second) unless given. `on` leases from the schema's lowest busy rate, 5 a second: a gateway
   * under valgrind serves a few dozen requests a second and would seldom reach the default.
   */
  leases?: 'off' | 'on';
}

const LEASES = {
  off: { enabled: false },
  on: { enabled: true, busyRequestsPerSecond: 5 },
} as const;

/** 99 ranges no bench client is in, then loopback: the worst case of a 100-entry list. */
function hundredRanges(): string[] {
  return [...Array.from({ length: 99 }, (_, i) => `10.${i}.0.0/16`), '127.0.0.0/8'];
}

/** A consumer's windows no run can reach. */
const CONSUMER_UNREACHABLE = { perMinute: 1_000_000_000, perDay: 1_000_000_000_000 };

/** What the measured operation costs in the month-and-cost row. */
const MEASURED_COST = 2;

// Every command a client of this process sends to Redis is a request and its reply: a round trip.
let redisCommandsSent = 0;
// Key lookups: HGET on the key store's by-hash hash (src/keys/stores/redis-key-store.ts), a key the
// cache did not hold or held past keys.cacheTtlSeconds. INFO commandstats cannot tell them apart from
// the HGETs Lua scripts run inside Redis (the key-usage flush runs two per key every 5 s).
let keyLookupsSent = 0;
const requestsReceived = countRequestsReceived();
const sendCommand = Redis.prototype.sendCommand;
Redis.prototype.sendCommand = function countedSendCommand(this: Redis, ...args: Parameters<Redis['sendCommand']>) {
  redisCommandsSent++;
  const [command] = args;
  if (command.name === 'hget' && String(command.args[0]).endsWith(':by-hash')) keyLookupsSent++;
  return sendCommand.apply(this, args);
};

async function main(): Promise<void> {
  const options = childOptions<GatewayChildOptions>();
  // Before the logger and the product exist, as src/main.ts starts it.
  if (options.tracing) {
    startTracing(
      {
        OTEL_EXPORTER_OTLP_ENDPOINT: options.tracing.sinkUrl,
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf',
        OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
        OTEL_TRACES_SAMPLER_ARG: String(options.tracing.ratio),
      },
      'animal-store-gateway',
    );
  }
  const env: Record<string, string> = {
    APP_ENV: 'development',
    SIGNING_SECRET: 'bench-signing-secret-that-is-long-enough-0123456789',
    ADMIN_TOKEN: 'bench-admin-token-that-is-long-enough-0123456789',
  };
  if (options.redisUrl) env.REDIS_URL = options.redisUrl;
  const rateLimit = {
    ...(options.minuteWindow ? { minuteWindow: options.minuteWindow } : {}),
    ...(options.leases ? { leases: LEASES[options.leases] } : {}),
  };
  const config = loadConfig({
    env,
    configDir: options.configDir,
    overrides: {
      dataDir: options.dataDir,
      server: { host: '127.0.0.1' },
      upstream: {
        url: options.target,
        forwarder: options.forwarder,
        ...(options.underValgrind ? { timeoutMs: 120_000 } : {}),
      },
      // 200 ms by default: on 2 cores shared with other work, a command can wait longer than that
      // while every server of the bench starts, and a request would be a 503. It changes no
      // per-request cost, only how long a slow command may take.
      redis: { namespace: options.namespace, commandTimeoutMs: options.underValgrind ? 20_000 : 2000 },
      logLevel: 'info',
      ...(options.banThreshold ? { ban: { threshold: options.banThreshold } } : {}),
      ...(Object.keys(rateLimit).length > 0 ? { rateLimit } : {}),
      ...(options.monthAndCost ? { costs: [{ method: 'GET', path: '/pets', cost: MEASURED_COST }] } : {}),
    },
  });
  const logger = createLogger(config.logLevel, undefined, { keyPrefix: config.keys.prefix, traceFields: tracing() });
  const product = await startProduct(config, { logger, gatewayPort: 0, adminPort: 0 });

  const unreachable = {
    perMinute: 1_000_000_000,
    perDay: 1_000_000_000_000,
    ...(options.monthAndCost ? { perMonth: 1_000_000_000_000 } : {}),
  };
  const policy = options.allowlist100
    ? { allowedOperations: ['listPets', 'getPet'], allowedAddresses: hundredRanges() }
    : {};
  const admittedConsumer = options.admittedInConsumer
    ? await product.consumerService.create({ name: 'bench one-key consumer', limits: CONSUMER_UNREACHABLE })
    : null;
  const admitted = await product.keyService.create({
    name: 'bench admitted',
    plan: 'enterprise',
    limits: { ...unreachable, ...(options.maxInFlight ? { maxInFlight: options.maxInFlight } : {}) },
    ...(options.monthAndCost ? { billingDay: 15 } : {}),
    ...(admittedConsumer ? { consumerId: admittedConsumer.id } : {}),
    ...policy,
  });
  // One request's worth: used up by the first request, whatever it costs.
  const oneRequest = options.monthAndCost
    ? { perMinute: MEASURED_COST, perDay: MEASURED_COST }
    : { perMinute: 1, perDay: 1 };
  const limited = await product.keyService.create({ name: 'bench limited', plan: 'enterprise', limits: oneRequest });
  const banned = await product.keyService.create({ name: 'bench banned', plan: 'enterprise', limits: oneRequest });
  const get = (key: string) =>
    fetch(`${product.gatewayUrl}/v1/pets`, { headers: { authorization: `Bearer ${key}` } }).then((res) =>
      res.arrayBuffer().then(() => res.status),
    );
  await get(limited.key);
  // A child told never to ban has no banned key to offer.
  if (config.ban.threshold <= 100) {
    for (let i = 0; i < config.ban.threshold + 2; i++) await get(banned.key);
  }

  const extra: string[] = [];
  const createExtra = (i: number) =>
    product.keyService
      .create({ name: `bench round-robin ${i}`, plan: 'enterprise', limits: unreachable })
      .then((created) => extra.push(created.key));
  for (let i = 0; i < (options.extraKeys ?? 0); i += 10)
    await Promise.all(Array.from({ length: Math.min(10, options.extraKeys! - i) }, (_, j) => createExtra(i + j)));
  if (options.consumerKeys) {
    // The consumer's windows are decided in the same script call as each key's: one round trip.
    const consumer = await product.consumerService.create({ name: 'bench consumer', limits: CONSUMER_UNREACHABLE });
    const createMember = (i: number) =>
      product.keyService
        .create({ name: `bench consumer key ${i}`, plan: 'enterprise', limits: unreachable, consumerId: consumer.id })
        .then((created) => extra.push(created.key));
    for (let i = 0; i < options.consumerKeys; i += 10)
      await Promise.all(Array.from({ length: Math.min(10, options.consumerKeys - i) }, (_, j) => createMember(i + j)));
  }
  // adminUrl: the bench reads gateway_lease_admissions_total{decided_by} from /metrics (instructions.ts).
  const details: Record<string, string> = {
    admitted: admitted.key,
    limited: limited.key,
    banned: banned.key,
    adminUrl: product.adminUrl,
    adminToken: env.ADMIN_TOKEN!,
  };
  if (extra.length > 0) details.keys = extra.join(',');

  announceReady(
    product.gatewayUrl,
    details,
    () => redisCommandsSent,
    () => product.close(),
    requestsReceived,
    () => keyLookupsSent,
  );
}

main().catch((err: unknown) => {
  process.stderr.write(`bench gateway: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
