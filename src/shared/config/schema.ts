import { z } from 'zod';
import {
  durationMs,
  httpUrl,
  instant,
  port,
  positiveInt,
  ratio,
  readableFile,
  wholeNumber,
  workerCount,
} from './fields';
import { redisConfigured, redisSourceCount } from './redis-sources';
import { costIssues, MAX_OPERATION_COST, operationIssues, ROUTE_TEMPLATE } from './costs';
import { notificationIssues, notificationsSchema } from './notifications';
import { secretScanningIssues, secretScanningSchema } from './secret-scanning';
import { usageEventsIssues, usageEventsSchema } from './usage-events';
import { parseAddressEntry } from '../http/address-entry';
import { BUSY_KEY_REQUESTS_PER_SECOND } from '../constants';

/**
 * A plan either fixes both limits or (enterprise) leaves them to each key. `shadow: true` counts
 * and reports its limits but forwards what they would refuse (CONTRACT §4, shadow mode).
 */
const planSchema = z
  .strictObject({
    perMinute: positiveInt.optional(),
    perDay: positiveInt.optional(),
    /** Units per billing month (CONTRACT §4); absent, the plan has no month window. */
    perMonth: positiveInt.optional(),
    shadow: z.boolean({ error: 'must be true or false' }).optional(),
    /** Requests of one key being forwarded at once, across the instances on one Redis (CONTRACT §3). */
    maxInFlight: wholeNumber(1, 10_000).optional(),
    /** Windows enforced but named and counted in no header (CONTRACT §4, src/limits/hidden-windows.ts). */
    hiddenWindows: z.array(z.enum(['minute', 'day', 'month'], { error: 'must be minute, day or month' })).optional(),
  })
  .refine((p) => (p.perMinute === undefined) === (p.perDay === undefined), {
    message: 'a plan sets both perMinute and perDay, or neither (limits then come from each key)',
  })
  .refine((p) => p.perMonth === undefined || p.perDay !== undefined, {
    message: 'perMonth needs perMinute and perDay beside it',
    path: ['perMonth'],
  });

/**
 * One entry of `server.trustedProxies`: an IPv4/IPv6 address or CIDR range, parsed as an access
 * policy's `allowedAddresses` entry (src/shared/http/address-entry.ts), so that what loads is what the
 * gateway matches (src/gateway/client-address.ts). An entry it cannot match is named at load.
 */
const trustedProxy = z.string().superRefine((entry, ctx) => {
  if (parseAddressEntry(entry) === null) {
    ctx.addIssue({
      code: 'custom',
      message: `${JSON.stringify(entry)} is not an IPv4/IPv6 address or CIDR range (such as 10.0.0.0/8, 192.0.2.7, ::1, 2001:db8::/32)`,
    });
  }
});

const deprecationSchema = z.strictObject({
  method: z.enum(['GET', 'POST', 'PUT', 'PATCH', 'DELETE']),
  /** Route template under the base path, e.g. `/pets/{petId}`. */
  path: z.string().regex(ROUTE_TEMPLATE, 'must be a route template under the base path, e.g. /pets/{petId}'),
  deprecatedAt: instant,
  sunset: instant,
  successor: z.string().min(1),
  docs: z.string().min(1),
});
export type DeprecationConfig = z.infer<typeof deprecationSchema>;

/** An operation's weight (CONTRACT §4): a request to it takes `cost` units of every window of its key. */
const costSchema = z.strictObject({
  method: deprecationSchema.shape.method,
  path: deprecationSchema.shape.path,
  cost: wholeNumber(1, MAX_OPERATION_COST),
});
export type CostConfig = z.infer<typeof costSchema>;

export const appEnvSchema = z.enum(['development', 'staging', 'production']);
export type AppEnv = z.infer<typeof appEnvSchema>;

/** The whole configuration: this schema is the type, and every default lives in config/default.yaml. */
export const configSchema = z
  .strictObject({
    env: appEnvSchema,
    server: z.strictObject({
      host: z.string().min(1),
      /** The admin listener's address: loopback unless set, as Kong's Admin API. */
      adminHost: z.string().min(1),
      port,
      adminPort: port,
      /** AUTHZ_PORT: the decision listener for an edge proxy (CONTRACT §11, docs/external-auth.md); null: off. */
      authzPort: port.nullable(),
      /** AUTHZ_HOST: its address; null: the public listener's (`host`). */
      authzHost: z.string().min(1).nullable(),
      /** Origin clients use to reach the gateway; absolute URLs in `Link` headers are built on it. */
      publicBaseUrl: httpUrl.nullable(),
      /** Socket addresses and CIDR ranges whose `X-Forwarded-For` is believed, read as `allowedAddresses` is. */
      trustedProxies: z.array(trustedProxy),
      maxBodyBytes: positiveInt,
      maxHeaderBytes: positiveInt,
      shutdownTimeoutMs: durationMs,
      /** A client's whole header section must arrive within this. */
      headersTimeoutMs: durationMs,
      /** A client's whole request, body included, must arrive within this. */
      requestTimeoutMs: durationMs,
      /** An idle keep-alive connection is closed after this. */
      keepAliveTimeoutMs: durationMs,
      /** Open connections on the public listener (per worker); further ones are closed at once. */
      maxConnections: positiveInt,
    }),
    /** TLS_CERT_FILE and TLS_KEY_FILE: with both set the public listener speaks HTTPS, HTTP/2 and HTTP/1.1 by ALPN. */
    tls: z.strictObject({ certFile: readableFile.nullable(), keyFile: readableFile.nullable() }),
    /** What one HTTP/2 client session may hold on the public listener (TLS only). */
    http2: z.strictObject({
      maxConcurrentStreams: wholeNumber(1, 1000),
      /** Header fields per request (the pseudo-headers count): past it the stream is refused. */
      maxHeaderListPairs: wholeNumber(4, 1000),
      /** Megabytes a session may buffer (streams, header tables, unsent data): past it new streams are refused. */
      maxSessionMemoryMb: wholeNumber(1, 1024),
      /** A session with no activity for this long is closed (GOAWAY). */
      idleTimeoutMs: durationMs,
    }),
    cors: z.strictObject({
      /** Origins whose browser code may call the API, e.g. https://app.example; `*` for any; empty: CORS off. */
      allowedOrigins: z.array(
        z
          .string()
          .regex(
            /^(\*|https?:\/\/[^/\s]+)$/,
            'must be an origin like https://app.example (scheme and host, no path), or *',
          ),
      ),
      maxAgeSeconds: wholeNumber(0, 86_400),
    }),
    upstream: z.strictObject({
      /** Inventory base URL; null means this process runs the inventory itself. */
      url: httpUrl.nullable(),
      timeoutMs: durationMs,
      maxSockets: positiveInt,
      /** Requests that may wait for a connection beyond maxSockets; past them a new one gets 503 at once. */
      maxPending: wholeNumber(0, 100_000),
      /** Stops sending to a failing inventory for a cool-down (src/gateway/upstream/circuit-breaker.ts). */
      circuitBreaker: z.strictObject({
        /** The share of the requests settled within windowMs that failed at which it opens. */
        failureRatio: ratio,
        /** Requests settled within windowMs before the ratio is judged: one burst of a few dozen is not an outage. */
        minimumRequests: positiveInt,
        windowMs: durationMs,
        /** The rule before issue 48 (failures in a row): named, so that an older file is told what to write instead. */
        consecutiveFailures: z
          .never({
            error:
              'was replaced by failureRatio, minimumRequests and windowMs, a share of failures over a window (docs/configuration.md)',
          })
          .optional(),
        cooldownMs: durationMs,
        halfOpenProbes: positiveInt,
      }),
      /** How requests reach the inventory: an undici Pool, or http-proxy-middleware over a node:http Agent. */
      forwarder: z.enum(['undici', 'http-proxy']),
    }),
    inventory: z.strictObject({ port, databaseFile: z.string().min(1) }),
    /** The SQLite files under dataDir: how long a write waits for another connection's lock before it is answered 503. */
    storage: z.strictObject({ busyTimeoutMs: wholeNumber(1, 60_000) }),
    redis: z.strictObject({
      url: z
        .string()
        .regex(/^rediss?:\/\//, 'must look like redis://host:port/db')
        .nullable(),
      clusterNodes: z.array(z.string().regex(/^[^:\s]+:\d+$/, 'must be host:port')),
      /** REDIS_SENTINELS: find the primary through these sentinels instead of REDIS_URL. */
      sentinels: z.array(z.string().regex(/^[^:\s]+:\d+$/, 'must be host:port')),
      /** REDIS_SENTINEL_NAME: the primary's name as the sentinels know it. */
      sentinelName: z.string().min(1),
      /** REDIS_SENTINEL_PASSWORD (or _FILE): the sentinels' own password, if they require one. */
      sentinelPassword: z.string().min(1).nullable(),
      tls: z.strictObject({
        /** REDIS_TLS_CA_FILE: PEM bundle that verifies the server's certificate; null: the system's CAs. */
        caFile: readableFile.nullable(),
        /** REDIS_TLS_CERT_FILE and REDIS_TLS_KEY_FILE: a client certificate, for mutual TLS. */
        certFile: readableFile.nullable(),
        keyFile: readableFile.nullable(),
      }),
      /** Prefix of every Redis key and channel, so staging and production can share one Redis. */
      namespace: z.string().regex(/^[A-Za-z0-9:_-]+$/, 'must be letters, digits, ":", "_" or "-", e.g. asg:prod'),
      commandTimeoutMs: durationMs,
      /** How long an admin write waits (WAIT 1 <ms>) for a replica to hold it; 0: never wait (docs/keys-and-console.md). */
      replicationWaitMs: wholeNumber(0, 10_000),
      /** REDIS_PASSWORD (or REDIS_PASSWORD_FILE): the ACL user's password, kept out of REDIS_URL. */
      password: z.string().min(1).nullable(),
      /** REDIS_USERNAME: the ACL user, for Cluster and Sentinel data nodes (a REDIS_URL may name it itself). */
      username: z
        .string()
        .regex(/^[^\s@:/]+$/, 'must be an ACL user name (no spaces, "@", ":" or "/")')
        .nullable(),
    }),
    store: z.strictObject({ failMode: z.enum(['local', 'open', 'closed']) }),
    keys: z.strictObject({
      prefix: z.string().regex(/^[a-z]+_[a-z]+_$/, 'must look like asg_live_'),
      cacheTtlSeconds: positiveInt,
      negativeCacheTtlSeconds: positiveInt,
      /** How often each instance checks that Redis still holds the key records (restored from DATA_DIR if not). */
      lossCheckSeconds: wholeNumber(1, 30),
    }),
    plans: z.record(
      z.string().regex(/^[a-z][a-z0-9_-]*$/, 'a plan name is lower-case letters, digits, "_" or "-"'),
      planSchema,
    ),
    anonymous: z.strictObject({ perMinute: positiveInt }),
    rateLimit: z.strictObject({
      /** `fixed`: UTC minutes; `sliding`: no 60-second interval admits more than the limit. */
      minuteWindow: z.enum(['fixed', 'sliding']),
      /** A 429's Retry-After gets a uniformly random 0..N whole seconds more, so refused clients spread out. */
      retryAfterJitterSeconds: wholeNumber(0, 3600),
      /**
       * Leases of units (docs/scaling.md "Leases"): a key busy on an instance is admitted from units
       * counted in Redis beforehand, with no round trip per request. Reloadable; off, every request
       * goes to Redis (and the leases out end, their units given back).
       */
      leases: z
        .strictObject({
          enabled: z.boolean({ error: 'must be true or false' }).default(true),
          /** Requests per second one instance (one worker) must see for a key before it takes leases for it. */
          busyRequestsPerSecond: wholeNumber(5, 1_000_000).default(BUSY_KEY_REQUESTS_PER_SECOND),
        })
        .default({ enabled: true, busyRequestsPerSecond: BUSY_KEY_REQUESTS_PER_SECOND }),
    }),
    ban: z.strictObject({ threshold: positiveInt, windowSeconds: positiveInt, durationSeconds: positiveInt }),
    deprecations: z.array(deprecationSchema),
    costs: z.array(costSchema),
    signing: z.strictObject({
      /** Shared HMAC secret between gateway and inventory; generated under dataDir in development. */
      secret: z.string().min(32, 'must be at least 32 characters').nullable(),
      /** Secrets the inventory still accepts while a rotation is under way; the gateway signs with `secret` only. */
      previousSecrets: z.array(z.string().min(32, 'must be at least 32 characters')),
      issuer: z.string().min(1),
      audience: z.string().min(1),
      tokenTtlSeconds: positiveInt,
    }),
    admin: z.strictObject({
      token: z.string().nullable(),
      /** Wrong admin tokens one address (an IPv6 /64) may send per minute; past it its wrong tokens get 429 until the minute ends. */
      failedTokensPerMinute: positiveInt,
      /** The same over all addresses together, so that rotating addresses gains nothing. The right token is never refused. */
      failedTokensPerMinuteTotal: positiveInt,
    }),
    /** Webhooks signed as Standard Webhooks (quota thresholds, bans, expiring keys) and their outbox. */
    notifications: notificationsSchema,
    /** POST /admin/secret-scanning: the public keys a secret-scanning partner signs with (config/secret-scanning.ts). */
    secretScanning: secretScanningSchema,
    /** Usage events: a CloudEvent per key, meter and closed period to a metering sink (src/usage/events). Off by default. */
    usageEvents: usageEventsSchema,
    /** Worker processes sharing both listeners; `auto` = the CPUs this process may use. */
    workers: workerCount,
    dataDir: z.string().min(1),
    logLevel: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']),
  })
  .superRefine((c, ctx) => {
    if (c.env !== 'development') {
      if (!c.signing.secret) {
        ctx.addIssue({
          code: 'custom',
          path: ['signing', 'secret'],
          message: `is required in ${c.env} (at least 32 characters)`,
        });
      }
    }
    if (redisSourceCount(c.redis) > 1) {
      ctx.addIssue({
        code: 'custom',
        path: ['redis', 'url'],
        message: 'set only one of REDIS_URL, REDIS_CLUSTER_NODES and REDIS_SENTINELS',
      });
    }
    if ((c.redis.tls.certFile === null) !== (c.redis.tls.keyFile === null)) {
      ctx.addIssue({
        code: 'custom',
        path: ['redis', 'tls', c.redis.tls.certFile === null ? 'certFile' : 'keyFile'],
        message: 'a client certificate needs both REDIS_TLS_CERT_FILE and REDIS_TLS_KEY_FILE',
      });
    }
    const tlsFileSet = c.redis.tls.caFile !== null || c.redis.tls.certFile !== null;
    if (tlsFileSet && c.redis.url !== null && c.redis.url.startsWith('redis://')) {
      ctx.addIssue({
        code: 'custom',
        path: ['redis', 'url'],
        message: 'REDIS_TLS_* settings need a rediss:// URL (TLS); redis:// is plain TCP',
      });
    }
    if (c.redis.password !== null && c.redis.url !== null && /^rediss?:\/\/[^/@]*:[^/@]*@/.test(c.redis.url)) {
      ctx.addIssue({
        code: 'custom',
        path: ['redis', 'password'],
        message: 'REDIS_URL holds a password too; give it in one place',
      });
    }
    if (c.redis.username !== null && c.redis.url !== null && /^rediss?:\/\/[^/@]+@/.test(c.redis.url)) {
      ctx.addIssue({
        code: 'custom',
        path: ['redis', 'username'],
        message: 'REDIS_URL names a user too; give it in one place',
      });
    }
    if ((c.tls.certFile === null) !== (c.tls.keyFile === null)) {
      ctx.addIssue({
        code: 'custom',
        path: ['tls', c.tls.certFile === null ? 'certFile' : 'keyFile'],
        message: 'HTTPS needs both TLS_CERT_FILE and TLS_KEY_FILE',
      });
    }
    if (c.server.headersTimeoutMs > c.server.requestTimeoutMs) {
      ctx.addIssue({
        code: 'custom',
        path: ['server', 'headersTimeoutMs'],
        message: 'must not be longer than server.requestTimeoutMs (node:http requires it)',
      });
    }
    if (c.workers !== 1 && !redisConfigured(c.redis)) {
      ctx.addIssue({
        code: 'custom',
        path: ['workers'],
        message:
          'more than one worker needs a shared store: set REDIS_URL, REDIS_CLUSTER_NODES or REDIS_SENTINELS (workers on the in-process store would each keep their own limits and keys)',
      });
    }
    for (const issue of costIssues(c.plans, c.costs)) ctx.addIssue({ code: 'custom', ...issue });
    for (const issue of operationIssues(c)) ctx.addIssue({ code: 'custom', ...issue });
    for (const issue of notificationIssues(c.notifications, c.server)) ctx.addIssue({ code: 'custom', ...issue });
    for (const issue of secretScanningIssues(c.secretScanning)) ctx.addIssue({ code: 'custom', ...issue });
    for (const issue of usageEventsIssues(c.usageEvents)) ctx.addIssue({ code: 'custom', ...issue });
    for (const [i, d] of c.deprecations.entries()) {
      if (Date.parse(d.sunset) <= Date.parse(d.deprecatedAt)) {
        ctx.addIssue({ code: 'custom', path: ['deprecations', i, 'sunset'], message: 'must be after deprecatedAt' });
      }
    }
  });

export type Config = z.infer<typeof configSchema>;
export type PlanConfig = Config['plans'][string];
