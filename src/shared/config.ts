import fs from 'node:fs';
import path from 'node:path';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { withSecretFiles } from './secret-files';

/** Numbers may arrive as strings from the environment; anything else is left for zod to refuse. */
const numeric = (schema: z.ZodNumber) =>
  z.preprocess((v) => (typeof v === 'string' && v.trim() !== '' && !Number.isNaN(Number(v)) ? Number(v) : v), schema);

/** A whole number in [min, max]; every way of missing it gets the same plain message. */
function wholeNumber(min: number, max: number = Number.MAX_SAFE_INTEGER) {
  const error = max === Number.MAX_SAFE_INTEGER ? `must be a whole number of at least ${min}` : `must be a whole number from ${min} to ${max}`;
  return numeric(z.number({ error }).int({ error }).min(min, { error }).max(max, { error }));
}

const port = wholeNumber(0, 65535);
const workerCountError = 'must be a whole number from 1 to 256, or auto';
const workerCount = z.union(
  [
    numeric(z.number({ error: workerCountError }).int({ error: workerCountError }).min(1, { error: workerCountError }).max(256, { error: workerCountError })),
    z.literal('auto', { error: workerCountError }),
  ],
  { error: workerCountError },
);
const positiveInt = wholeNumber(1);
const durationMs = wholeNumber(1, 3_600_000);
const instant = z.iso.datetime({ offset: true, error: 'must be an ISO 8601 instant with a time zone, e.g. 2030-12-05T00:00:00Z' });
/** A file read once at startup (a certificate, a key): it must exist and be readable now. */
const readableFile = z.string().min(1).refine(
  (file) => {
    try {
      fs.accessSync(file, fs.constants.R_OK);
      return fs.statSync(file).isFile();
    } catch {
      return false;
    }
  },
  { error: 'must name a readable file' },
);
const httpUrl = z.url({ protocol: /^https?$/, error: 'must be an http:// or https:// URL' });

export const windowLimitsSchema = z.strictObject({ perMinute: positiveInt, perDay: positiveInt });
export type WindowLimits = z.infer<typeof windowLimitsSchema>;

/**
 * A plan either fixes both limits or (enterprise) leaves them to each key. `shadow: true` counts
 * and reports its limits but forwards what they would refuse (CONTRACT §4, shadow mode).
 */
const planSchema = z
  .strictObject({
    perMinute: positiveInt.optional(),
    perDay: positiveInt.optional(),
    shadow: z.boolean({ error: 'must be true or false' }).optional(),
  })
  .refine(
  (p) => (p.perMinute === undefined) === (p.perDay === undefined),
  { message: 'a plan sets both perMinute and perDay, or neither (limits then come from each key)' },
);

const deprecationSchema = z.strictObject({
  method: z.enum(['GET', 'POST', 'PUT', 'PATCH', 'DELETE']),
  /** Route template under the base path, e.g. `/pets/{petId}`. */
  path: z.string().regex(/^\/[A-Za-z0-9_{}\/-]*$/, 'must be a route template under the base path, e.g. /pets/{petId}'),
  deprecatedAt: instant,
  sunset: instant,
  successor: z.string().min(1),
  docs: z.string().min(1),
});
export type DeprecationConfig = z.infer<typeof deprecationSchema>;

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
      /** Origin clients use to reach the gateway; absolute URLs in `Link` headers are built on it. */
      publicBaseUrl: httpUrl.nullable(),
      /** Socket addresses whose `X-Forwarded-For` is believed. */
      trustedProxies: z.array(z.string().min(1)),
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
    cors: z.strictObject({
      /** Origins whose browser code may call the API, e.g. https://app.example; `*` for any; empty: CORS off. */
      allowedOrigins: z.array(z.string().regex(/^(\*|https?:\/\/[^/\s]+)$/, 'must be an origin like https://app.example (scheme and host, no path), or *')),
      maxAgeSeconds: wholeNumber(0, 86_400),
    }),
    upstream: z.strictObject({
      /** Inventory base URL; null means this process runs the inventory itself. */
      url: httpUrl.nullable(),
      timeoutMs: durationMs,
      maxSockets: positiveInt,
      /** Requests that may wait for a connection beyond maxSockets; past them a new one gets 503 at once. */
      maxPending: wholeNumber(0, 100_000),
      /** Stops sending to a failing inventory for a cool-down (src/gateway/circuit-breaker.ts). */
      circuitBreaker: z.strictObject({
        consecutiveFailures: positiveInt,
        cooldownMs: durationMs,
        halfOpenProbes: positiveInt,
      }),
      /** How requests reach the inventory: an undici Pool, or http-proxy-middleware over a node:http Agent. */
      forwarder: z.enum(['undici', 'http-proxy']),
    }),
    inventory: z.strictObject({ port, databaseFile: z.string().min(1) }),
    redis: z.strictObject({
      url: z.string().regex(/^rediss?:\/\//, 'must look like redis://host:port/db').nullable(),
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
      /** REDIS_PASSWORD (or REDIS_PASSWORD_FILE): the ACL user's password, kept out of REDIS_URL. */
      password: z.string().min(1).nullable(),
      /** REDIS_USERNAME: the ACL user, for Cluster and Sentinel data nodes (a REDIS_URL may name it itself). */
      username: z.string().regex(/^[^\s@:/]+$/, 'must be an ACL user name (no spaces, "@", ":" or "/")').nullable(),
    }),
    store: z.strictObject({ failMode: z.enum(['local', 'open', 'closed']) }),
    keys: z.strictObject({
      prefix: z.string().regex(/^[a-z]+_[a-z]+_$/, 'must look like asg_live_'),
      cacheTtlSeconds: positiveInt,
      negativeCacheTtlSeconds: positiveInt,
    }),
    plans: z.record(z.string().regex(/^[a-z][a-z0-9_-]*$/, 'a plan name is lower-case letters, digits, "_" or "-"'), planSchema),
    anonymous: z.strictObject({ perMinute: positiveInt }),
    rateLimit: z.strictObject({
      /** `fixed`: UTC minutes; `sliding`: no 60-second interval admits more than the limit. */
      minuteWindow: z.enum(['fixed', 'sliding']),
      /** A 429's Retry-After gets a uniformly random 0..N whole seconds more, so refused clients spread out. */
      retryAfterJitterSeconds: wholeNumber(0, 3600),
    }),
    ban: z.strictObject({ threshold: positiveInt, windowSeconds: positiveInt, durationSeconds: positiveInt }),
    deprecations: z.array(deprecationSchema),
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
      /** Wrong admin tokens one address may send per minute before it is locked out until the minute ends. */
      failedTokensPerMinute: positiveInt,
    }),
    /** Worker processes sharing both listeners; `auto` = the CPUs this process may use. */
    workers: workerCount,
    dataDir: z.string().min(1),
    logLevel: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']),
  })
  .superRefine((c, ctx) => {
    if (c.env !== 'development') {
      if (!c.signing.secret) {
        ctx.addIssue({ code: 'custom', path: ['signing', 'secret'], message: `is required in ${c.env} (at least 32 characters)` });
      }
    }
    const redisSources = [c.redis.url !== null, c.redis.clusterNodes.length > 0, c.redis.sentinels.length > 0].filter(Boolean).length;
    if (redisSources > 1) {
      ctx.addIssue({ code: 'custom', path: ['redis', 'url'], message: 'set only one of REDIS_URL, REDIS_CLUSTER_NODES and REDIS_SENTINELS' });
    }
    if ((c.redis.tls.certFile === null) !== (c.redis.tls.keyFile === null)) {
      ctx.addIssue({ code: 'custom', path: ['redis', 'tls', c.redis.tls.certFile === null ? 'certFile' : 'keyFile'], message: 'a client certificate needs both REDIS_TLS_CERT_FILE and REDIS_TLS_KEY_FILE' });
    }
    const tlsFileSet = c.redis.tls.caFile !== null || c.redis.tls.certFile !== null;
    if (tlsFileSet && c.redis.url !== null && c.redis.url.startsWith('redis://')) {
      ctx.addIssue({ code: 'custom', path: ['redis', 'url'], message: 'REDIS_TLS_* settings need a rediss:// URL (TLS); redis:// is plain TCP' });
    }
    if (c.redis.password !== null && c.redis.url !== null && /^rediss?:\/\/[^/@]*:[^/@]*@/.test(c.redis.url)) {
      ctx.addIssue({ code: 'custom', path: ['redis', 'password'], message: 'REDIS_URL holds a password too; give it in one place' });
    }
    if (c.redis.username !== null && c.redis.url !== null && /^rediss?:\/\/[^/@]+@/.test(c.redis.url)) {
      ctx.addIssue({ code: 'custom', path: ['redis', 'username'], message: 'REDIS_URL names a user too; give it in one place' });
    }
    if (c.server.headersTimeoutMs > c.server.requestTimeoutMs) {
      ctx.addIssue({ code: 'custom', path: ['server', 'headersTimeoutMs'], message: 'must not be longer than server.requestTimeoutMs (node:http requires it)' });
    }
    if (c.workers !== 1 && c.redis.url === null && c.redis.clusterNodes.length === 0 && c.redis.sentinels.length === 0) {
      ctx.addIssue({
        code: 'custom',
        path: ['workers'],
        message: 'more than one worker needs a shared store: set REDIS_URL, REDIS_CLUSTER_NODES or REDIS_SENTINELS (workers on the in-process store would each keep their own limits and keys)',
      });
    }
    for (const [i, d] of c.deprecations.entries()) {
      if (Date.parse(d.sunset) <= Date.parse(d.deprecatedAt)) {
        ctx.addIssue({ code: 'custom', path: ['deprecations', i, 'sunset'], message: 'must be after deprecatedAt' });
      }
    }
  });

export type Config = z.infer<typeof configSchema>;
export type PlanConfig = Config['plans'][string];

/** Bad settings, every one of them: each problem is the one line an operator sees for it. */
export class ConfigError extends Error {
  readonly problems: readonly string[];
  constructor(problems: string | readonly string[]) {
    const list = typeof problems === 'string' ? [problems] : problems;
    super(list.join('\n'));
    this.name = 'ConfigError';
    this.problems = list;
  }
}

/** Environment variables and the config path each one sets (CONTRACT §2). */
export const envBindings: ReadonlyArray<{ variable: string; path: string[]; list?: boolean }> = [
  { variable: 'APP_ENV', path: ['env'] },
  { variable: 'HOST', path: ['server', 'host'] },
  { variable: 'ADMIN_HOST', path: ['server', 'adminHost'] },
  { variable: 'PORT', path: ['server', 'port'] },
  { variable: 'ADMIN_PORT', path: ['server', 'adminPort'] },
  { variable: 'PUBLIC_BASE_URL', path: ['server', 'publicBaseUrl'] },
  { variable: 'INVENTORY_PORT', path: ['inventory', 'port'] },
  { variable: 'INVENTORY_URL', path: ['upstream', 'url'] },
  { variable: 'REDIS_URL', path: ['redis', 'url'] },
  { variable: 'REDIS_CLUSTER_NODES', path: ['redis', 'clusterNodes'], list: true },
  { variable: 'REDIS_PASSWORD', path: ['redis', 'password'] },
  { variable: 'REDIS_USERNAME', path: ['redis', 'username'] },
  { variable: 'REDIS_SENTINELS', path: ['redis', 'sentinels'], list: true },
  { variable: 'REDIS_SENTINEL_NAME', path: ['redis', 'sentinelName'] },
  { variable: 'REDIS_SENTINEL_PASSWORD', path: ['redis', 'sentinelPassword'] },
  { variable: 'REDIS_TLS_CA_FILE', path: ['redis', 'tls', 'caFile'] },
  { variable: 'REDIS_TLS_CERT_FILE', path: ['redis', 'tls', 'certFile'] },
  { variable: 'REDIS_TLS_KEY_FILE', path: ['redis', 'tls', 'keyFile'] },
  { variable: 'ADMIN_TOKEN', path: ['admin', 'token'] },
  { variable: 'SIGNING_SECRET', path: ['signing', 'secret'] },
  { variable: 'SIGNING_PREVIOUS_SECRETS', path: ['signing', 'previousSecrets'], list: true },
  { variable: 'STORE_FAIL_MODE', path: ['store', 'failMode'] },
  { variable: 'RATE_LIMIT_MINUTE_WINDOW', path: ['rateLimit', 'minuteWindow'] },
  { variable: 'RATE_LIMIT_RETRY_AFTER_JITTER_SECONDS', path: ['rateLimit', 'retryAfterJitterSeconds'] },
  { variable: 'SHUTDOWN_TIMEOUT_MS', path: ['server', 'shutdownTimeoutMs'] },
  { variable: 'DATA_DIR', path: ['dataDir'] },
  { variable: 'LOG_LEVEL', path: ['logLevel'] },
  { variable: 'WORKERS', path: ['workers'] },
];

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type JsonObject = { [key: string]: Json };

function isObject(v: unknown): v is JsonObject {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Objects merge key by key; arrays and scalars are replaced whole (CONTRACT §2). */
export function mergeConfig(base: JsonObject, override: JsonObject): JsonObject {
  const merged: JsonObject = { ...base };
  for (const [key, value] of Object.entries(override)) {
    const current = merged[key];
    merged[key] = isObject(current) && isObject(value) ? mergeConfig(current, value) : value;
  }
  return merged;
}

const readFailures: Record<string, string> = { ENOENT: 'does not exist', EACCES: 'cannot be read (permission denied)', EISDIR: 'is a directory' };

/**
 * A config file's settings, or null after adding the reason it cannot be used to `problems`.
 * `label` names the file in the line: `CONFIG_FILE` for the operator's own, `config file` for ours.
 */
function readConfigFile(file: string, label: string, problems: string[]): JsonObject | null {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? 'error';
    problems.push(`${label} ${file} ${readFailures[code] ?? `cannot be read (${code})`}`);
    return null;
  }
  let parsed: unknown;
  try {
    parsed = file.endsWith('.json') ? JSON.parse(text) : parseYaml(text);
  } catch (err) {
    problems.push(`${label} ${file} is not valid ${file.endsWith('.json') ? 'JSON' : 'YAML'}: ${(err as Error).message.split('\n')[0]}`);
    return null;
  }
  if (parsed === null || parsed === undefined) return {};
  if (!isObject(parsed)) {
    problems.push(`${label} ${file} must hold a mapping of settings at the top level`);
    return null;
  }
  return parsed;
}

/** `config/<name>.yaml`, `.yml` or `.json`, whichever exists; none is fine except for `default`. */
function findConfigFile(dir: string, name: string): string | null {
  for (const ext of ['.yaml', '.yml', '.json']) {
    const candidate = path.join(dir, name + ext);
    if (fs.existsSync(candidate)) return candidate;
  }
  return null;
}

function setPath(target: JsonObject, keys: string[], value: Json): void {
  let node = target;
  for (const key of keys.slice(0, -1)) {
    const next = node[key];
    node = isObject(next) ? next : (node[key] = {});
  }
  node[keys[keys.length - 1]!] = value;
}

function bindingOf(dotted: string) {
  return envBindings.find((b) => dotted === b.path.join('.') || dotted.startsWith(b.path.join('.') + '.'));
}

/** `PORT (server.port)`: the variable and the config path, either of which may have set it. */
function settingName(issuePath: PropertyKey[]): string {
  const dotted = issuePath.map(String).join('.');
  const binding = bindingOf(dotted);
  return binding ? `${binding.variable} (${dotted})` : dotted || '(root)';
}

/** What one line stands for: a variable (all of a list's entries are one setting) or a config path. */
function settingKey(issue: z.core.$ZodIssue): string {
  const dotted = issue.path.map(String).join('.');
  return bindingOf(dotted)?.variable ?? dotted;
}

const typeNames: Record<string, string> = {
  number: 'a number',
  string: 'a string',
  boolean: 'true or false',
  array: 'a list',
  object: 'a mapping of settings',
};

/** zod's own wording ("Invalid input: expected number, received string") says too little; the schema's own messages say enough. */
const zodDefaultMessage = /^(Invalid|Too (big|small)|Unrecognized)/;

/** One zod issue as the operator's one line. */
function describeIssue(issue: z.core.$ZodIssue): string {
  if (issue.code === 'unrecognized_keys') {
    return `unknown setting ${settingName([...issue.path, issue.keys[0]!])}: config/default.yaml lists every setting`;
  }
  const name = settingName(issue.path);
  if (zodDefaultMessage.test(issue.message)) {
    switch (issue.code) {
      case 'invalid_value':
        return `invalid setting ${name}: must be one of ${issue.values.map(String).join(', ')}`;
      case 'invalid_type':
        if (issue.message.endsWith('received undefined')) return `missing setting ${name}: must be ${typeNames[issue.expected] ?? issue.expected}`;
        return `invalid setting ${name}: must be ${typeNames[issue.expected] ?? issue.expected}`;
      case 'too_small':
        if (issue.origin === 'string') {
          return `invalid setting ${name}: ${issue.minimum === 1 ? 'must not be empty' : `must be at least ${issue.minimum} characters`}`;
        }
        break;
      case 'invalid_key':
        return `invalid setting ${name}: ${issue.issues[0]?.message ?? issue.message}`;
      default:
        break;
    }
  }
  return `invalid setting ${name}: ${issue.message}`;
}

export interface LoadConfigOptions {
  env?: NodeJS.ProcessEnv;
  configDir?: string;
  /** Applied last, after the environment: how tests and embedded runs adjust a setting. */
  overrides?: JsonObject;
  /** The inventory alone needs no admin token; the gateway (default) does outside development. */
  role?: 'gateway' | 'inventory';
}

/**
 * default → APP_ENV file → CONFIG_FILE → environment variables → overrides, then one zod parse.
 * Throws ConfigError naming every bad setting, one line each, so that an operator fixes them all
 * in one go rather than meeting them one restart at a time.
 */
export function loadConfig(options: LoadConfigOptions = {}): Config {
  const problems: string[] = [];
  const env = withSecretFiles(options.env ?? process.env, problems);
  const configDir = options.configDir ?? path.resolve(__dirname, '..', '..', 'config');
  const appEnv = appEnvSchema.safeParse(env.APP_ENV ?? 'development');
  if (!appEnv.success) problems.push(`invalid setting APP_ENV: must be development, staging or production (got "${env.APP_ENV}")`);

  const defaultFile = findConfigFile(configDir, 'default');
  if (!defaultFile) throw new ConfigError(`config/default.yaml not found in ${configDir}`);
  let raw = readConfigFile(defaultFile, 'config file', problems) ?? {};
  // With APP_ENV unknown there is no environment file to read; the rest is still checked.
  const envFile = appEnv.success ? findConfigFile(configDir, appEnv.data) : null;
  if (envFile) raw = mergeConfig(raw, readConfigFile(envFile, 'config file', problems) ?? {});
  if (env.CONFIG_FILE) raw = mergeConfig(raw, readConfigFile(path.resolve(env.CONFIG_FILE), 'invalid setting CONFIG_FILE:', problems) ?? {});

  const fromEnv: JsonObject = {};
  for (const binding of envBindings) {
    const value = env[binding.variable];
    if (value === undefined || value === '') continue;
    setPath(fromEnv, binding.path, binding.list ? value.split(',').map((s) => s.trim()).filter(Boolean) : value);
  }
  raw = mergeConfig(raw, fromEnv);
  if (options.overrides) raw = mergeConfig(raw, options.overrides);

  const result = configSchema.safeParse(appEnv.success ? raw : { ...raw, env: 'development' });
  if (!result.success) {
    const named = new Set<string>();
    for (const issue of result.error.issues) {
      const setting = issue.code === 'unrecognized_keys' ? `${settingKey(issue)}.${issue.keys[0]}` : settingKey(issue);
      if (named.has(setting)) continue;
      named.add(setting);
      problems.push(describeIssue(issue));
    }
  }
  if (appEnv.success && (options.role ?? 'gateway') === 'gateway' && appEnv.data !== 'development') {
    const token = (raw.admin as JsonObject | undefined)?.token;
    if (typeof token !== 'string' || token.length < 32) {
      problems.push(`invalid setting ${settingName(['admin', 'token'])}: is required in ${appEnv.data} and must be at least 32 characters`);
    }
  }
  if (problems.length > 0 || !result.success) throw new ConfigError(problems);
  return result.data;
}

/** Limits of a plan, or null when the plan leaves them to each key (enterprise). */
export function planLimits(config: Config, plan: string): WindowLimits | null {
  const p = config.plans[plan];
  if (!p || p.perMinute === undefined || p.perDay === undefined) return null;
  return { perMinute: p.perMinute, perDay: p.perDay };
}
