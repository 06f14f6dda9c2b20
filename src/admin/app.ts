import { createHash, timingSafeEqual } from 'node:crypto';
import express, { type NextFunction, type Request, type Response } from 'express';
import { z } from 'zod';
import { ApiError, errorHandler, sendError } from '../shared/errors';
import type { Logger } from '../shared/logger';
import { systemClock, type Clock } from '../shared/clock';
import { FAILED_TOKEN_DELAY_MS, FailedTokenLimiter } from './failed-tokens';
import type { ApiKeyRecord, KeyPatch, NewKeyInput } from '../keys/types';
import type { KeyLimiter, WindowLimits } from '../limits/types';
import type { DeprecationReport } from '../gateway/deprecation-report';
import type { AuditAction, AuditLog } from './audit-log';
import { buildStatsReport } from './stats/stats-report';
import type { TrafficSecond } from './stats/traffic-recorder';
import { consoleRouter } from './console/console-router';

/** What the admin API needs from the key service. */
export interface KeyAdministration {
  create(input: NewKeyInput): Promise<{ key: string; record: ApiKeyRecord }>;
  get(id: string): Promise<ApiKeyRecord | null>;
  list(): Promise<ApiKeyRecord[]>;
  update(id: string, patch: KeyPatch): Promise<ApiKeyRecord | null>;
  revoke(id: string): Promise<ApiKeyRecord | null>;
  /** Null for an unknown id; throws ApiError('conflict') for a revoked key. */
  rotate(id: string, graceSeconds?: number): Promise<{ key: string; record: ApiKeyRecord } | null>;
  effectiveLimits(record: ApiKeyRecord): WindowLimits | null;
}

/** Each key's use, as counted off the request path (src/keys/key-activity.ts). */
export interface KeyUsageHistory {
  usage(keyId: string, days: number): Promise<{ keyId: string; days: Array<{ date: string; admitted: number; rateLimited: number; banned: number }> }>;
  lastUsed(keyIds: readonly string[]): Promise<Map<string, number>>;
}

/** What GET /metrics serves: this process's registry, or every worker's summed (src/workers). */
export interface MetricsSource {
  contentType: string;
  text(): Promise<string>;
}

/** A dependency /readyz checks; `check` rejects when it is not answering. */
export interface ReadinessCheck {
  name: string;
  check(): Promise<void>;
}

export interface AdminDependencies {
  adminToken: string;
  /** Config `admin.failedTokensPerMinute`. */
  failedTokensPerMinute: number;
  /** Each refused admin token (`missing` or `invalid`), with the client's address: gateway_admin_auth_failures_total. */
  onFailedToken?: (reason: 'missing' | 'invalid' | 'locked_out', address: string) => void;
  clock?: Clock;
  keys: KeyAdministration;
  keyLimiter: KeyLimiter;
  keyActivity: KeyUsageHistory;
  auditLog: AuditLog;
  metrics: MetricsSource;
  readiness: ReadinessCheck[];
  /** States /readyz reports beside its checks without failing on them (the upstream circuit breaker's). */
  readinessDetails?: () => Record<string, string>;
  /** Who called deprecated operations in the last 30 days (GET /admin/deprecations). */
  deprecations: () => Promise<DeprecationReport>;
  /** The last 15 minutes of this process's traffic, per second (every worker's, summed, under WORKERS > 1). */
  trafficSeconds: () => Promise<TrafficSecond[]>;
  logger: Logger;
  maxBodyBytes: number;
}

const limitsSchema = z.strictObject({
  perMinute: z.number().int().min(1).max(Number.MAX_SAFE_INTEGER),
  perDay: z.number().int().min(1).max(Number.MAX_SAFE_INTEGER),
  /** Shadow mode for this key (CONTRACT §4); absent, the key follows its plan. */
  shadow: z.boolean().optional(),
});
const createKeySchema = z.strictObject({
  name: z.string(),
  plan: z.string(),
  limits: limitsSchema.nullable().optional(),
  expiresAt: z.string().nullable().optional(),
});
const updateKeySchema = z.strictObject({
  name: z.string().optional(),
  plan: z.string().optional(),
  limits: limitsSchema.nullable().optional(),
  expiresAt: z.string().nullable().optional(),
});
const rotateKeySchema = z.strictObject({
  graceSeconds: z.number().int().min(0).max(604_800).optional(),
});

/** An integer query parameter within bounds, its default when absent; else 400 invalid_parameter. */
function intParameter(value: unknown, name: string, min: number, max: number, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'string' || !/^\d{1,6}$/.test(value) || Number(value) < min || Number(value) > max) {
    throw new ApiError('invalid_parameter', `${name} must be an integer from ${min} to ${max}.`);
  }
  return Number(value);
}

function parseBody<T>(schema: z.ZodType<T>, body: unknown): T {
  const result = schema.safeParse(body);
  if (!result.success) {
    const issue = result.error.issues[0]!;
    const where = issue.path.length > 0 ? issue.path.join('.') : 'body';
    throw new ApiError('validation_failed', `${where}: ${issue.message}`);
  }
  return result.data;
}

/** SHA-256 first, so the comparison takes the same time whatever the lengths. */
function tokensEqual(presented: string, expected: string): boolean {
  const a = createHash('sha256').update(presented).digest();
  const b = createHash('sha256').update(expected).digest();
  return timingSafeEqual(a, b);
}

const ADMIN_REALM = 'Bearer realm="animal-store-admin"';

export function createAdminApp(deps: AdminDependencies): express.Express {
  const { keys, logger } = deps;
  const failedTokens = new FailedTokenLimiter(deps.failedTokensPerMinute, deps.clock ?? systemClock);

  function publicView(record: ApiKeyRecord, lastUsed: Map<string, number>) {
    const lastUsedAt = lastUsed.get(record.id);
    return {
      id: record.id,
      name: record.name,
      plan: record.plan,
      limits: keys.effectiveLimits(record),
      createdAt: record.createdAt,
      revokedAt: record.revokedAt,
      expiresAt: record.expiresAt,
      lastUsedAt: lastUsedAt === undefined ? null : new Date(lastUsedAt).toISOString(),
    };
  }

  async function viewOf(record: ApiKeyRecord) {
    return publicView(record, await deps.keyActivity.lastUsed([record.id]));
  }

  /**
   * The admin token, compared in constant time. A refusal carries the challenge (RFC 9110
   * §11.6.1), is counted and logged with the client's address, and waits FAILED_TOKEN_DELAY_MS;
   * an address with too many refusals in a minute is refused outright until the minute ends.
   */
  async function requireAdminToken(req: Request, _res: Response, next: NextFunction): Promise<void> {
    const address = req.socket.remoteAddress ?? 'unknown';
    const lockedOutForMs = failedTokens.lockedOutForMs(address);
    if (lockedOutForMs > 0) {
      deps.onFailedToken?.('locked_out', address);
      throw new ApiError('rate_limited', 'Too many wrong admin tokens from this address. Wait before trying again.', { 'Retry-After': String(Math.ceil(lockedOutForMs / 1000)) });
    }
    const header = req.headers.authorization;
    const presented = header ? /^Bearer +(\S+) *$/i.exec(header)?.[1] : undefined;
    if (presented !== undefined && tokensEqual(presented, deps.adminToken)) return next();

    const reason = header ? 'invalid' : 'missing';
    failedTokens.recordFailure(address);
    deps.onFailedToken?.(reason, address);
    logger.warn({ reason, clientAddress: address, method: req.method, path: req.path }, 'admin token refused');
    await new Promise((resolve) => setTimeout(resolve, FAILED_TOKEN_DELAY_MS));
    if (reason === 'missing') {
      throw new ApiError('missing_api_key', 'The admin API needs "Authorization: Bearer <ADMIN_TOKEN>".', { 'WWW-Authenticate': ADMIN_REALM });
    }
    throw new ApiError('invalid_api_key', 'The admin token is not valid.', {
      'WWW-Authenticate': `${ADMIN_REALM}, error="invalid_token", error_description="The admin token is not valid."`,
    });
  }

  function requireJson(req: Request, _res: Response, next: NextFunction): void {
    if (req.headers['content-length'] === '0' || (req.headers['content-length'] === undefined && !req.headers['transfer-encoding'])) {
      throw new ApiError('validation_failed', 'A JSON request body is required.');
    }
    if (!req.is('application/json')) throw new ApiError('unsupported_media_type', 'Send the body as application/json.');
    next();
  }

  async function loadKey(id: string): Promise<ApiKeyRecord> {
    const record = await keys.get(id);
    if (!record) throw new ApiError('not_found', `No key with id ${id}.`);
    return record;
  }

  /**
   * The log line as before, and an entry in the shared trail. The write itself already happened, so a
   * trail that cannot be reached is logged as an error rather than failing the answer.
   */
  async function audit(req: Request, action: AuditAction, keyId: string, details: Record<string, unknown> = {}): Promise<void> {
    logger.info({ audit: true, action, keyId, admin: req.socket.remoteAddress }, `admin ${action}`);
    const at = new Date((deps.clock ?? systemClock).now()).toISOString();
    try {
      await deps.auditLog.append({ at, action, keyId, details });
    } catch (err) {
      logger.error({ err: (err as Error).message, action, keyId }, 'could not append to the audit trail');
    }
  }

  const app = express();
  app.disable('x-powered-by');
  app.disable('etag');
  const json = express.json({ limit: deps.maxBodyBytes, strict: false });

  app.get('/healthz', (_req, res) => {
    res.json({ status: 'ok' });
  });

  const runReadinessChecks = () =>
    Promise.all(
      deps.readiness.map(async ({ name, check }) => {
        try {
          await check();
          return { name, ok: true };
        } catch {
          return { name, ok: false };
        }
      }),
    );

  app.get('/readyz', async (_req, res) => {
    const results = await runReadinessChecks();
    const failing = results.filter((r) => !r.ok).map((r) => r.name);
    const details = deps.readinessDetails?.();
    if (failing.length === 0) {
      res.json({ status: 'ready', checks: Object.fromEntries(results.map((r) => [r.name, 'ok'])), ...details });
      return;
    }
    res.status(503).json({
      code: 'service_unavailable',
      message: `Not ready: ${failing.join(', ')} not answering.`,
      status: 503,
      failing,
      ...details,
    });
  });

  app.get('/metrics', async (_req, res) => {
    const text = await deps.metrics.text();
    res.setHeader('Content-Type', deps.metrics.contentType);
    res.send(text);
  });

  const admin = express.Router();
  admin.use(requireAdminToken);

  admin.post('/keys', requireJson, json, async (req, res) => {
    const input = parseBody(createKeySchema, req.body);
    const { key, record } = await keys.create(input);
    const limits = keys.effectiveLimits(record);
    await audit(req, 'create', record.id, { name: record.name, plan: record.plan, limits, expiresAt: record.expiresAt });
    res.status(201).json({ id: record.id, key, name: record.name, plan: record.plan, limits, createdAt: record.createdAt, expiresAt: record.expiresAt });
  });

  admin.get('/keys', async (_req, res) => {
    const records = await keys.list();
    const lastUsed = await deps.keyActivity.lastUsed(records.map((r) => r.id));
    res.json(records.map((record) => publicView(record, lastUsed)));
  });

  admin.get('/keys/:id', async (req, res) => {
    const record = await loadKey(req.params.id as string);
    const limits = keys.effectiveLimits(record);
    if (!limits) throw new Error(`key ${record.id} has no limits`);
    const usage = await deps.keyLimiter.usage(record.id, limits);
    const windowView = (w: { limit: number; remaining: number; resetAt: number }) => ({
      limit: w.limit,
      remaining: w.remaining,
      reset: Math.ceil(w.resetAt / 1000),
    });
    res.json({
      ...(await viewOf(record)),
      usage: { minute: windowView(usage.minute), day: windowView(usage.day) },
      bannedUntil: usage.bannedUntil === null ? null : new Date(usage.bannedUntil).toISOString(),
      previousKeyExpiresAt: record.previousKeyExpiresAt,
    });
  });

  admin.get('/keys/:id/usage', async (req, res) => {
    const days = intParameter(req.query.days, 'days', 1, 90, 30);
    const record = await loadKey(req.params.id as string);
    res.json(await deps.keyActivity.usage(record.id, days));
  });

  admin.post('/keys/:id/rotate', json, async (req, res) => {
    // The body is optional ({graceSeconds} has a default); one that is sent must be JSON.
    const hasBody = req.headers['content-length'] !== undefined ? req.headers['content-length'] !== '0' : req.headers['transfer-encoding'] !== undefined;
    if (hasBody && !req.is('application/json')) throw new ApiError('unsupported_media_type', 'Send the body as application/json.');
    const { graceSeconds } = parseBody(rotateKeySchema, hasBody ? req.body : {});
    const rotated = await keys.rotate(req.params.id as string, graceSeconds);
    if (!rotated) throw new ApiError('not_found', `No key with id ${req.params.id}.`);
    const { key, record } = rotated;
    await audit(req, 'rotate', record.id, { graceSeconds: graceSeconds ?? null, previousKeyExpiresAt: record.previousKeyExpiresAt });
    res.status(201).json({ ...(await viewOf(record)), key, previousKeyExpiresAt: record.previousKeyExpiresAt });
  });

  admin.patch('/keys/:id', requireJson, json, async (req, res) => {
    const patch = parseBody(updateKeySchema, req.body);
    const record = await keys.update(req.params.id as string, patch);
    if (!record) throw new ApiError('not_found', `No key with id ${req.params.id}.`);
    // What was asked for, as stored (an expiry normalised to UTC).
    const details: Record<string, unknown> = {};
    for (const field of Object.keys(patch) as Array<keyof typeof patch>) details[field] = record[field];
    await audit(req, 'update', record.id, details);
    res.json(await viewOf(record));
  });

  admin.delete('/keys/:id', async (req, res) => {
    const record = await keys.revoke(req.params.id as string);
    if (!record) throw new ApiError('not_found', `No key with id ${req.params.id}.`);
    await audit(req, 'revoke', record.id, { revokedAt: record.revokedAt });
    res.status(204).end();
  });

  admin.delete('/keys/:id/ban', async (req, res) => {
    const record = await loadKey(req.params.id as string);
    await deps.keyLimiter.unban(record.id);
    await audit(req, 'unban', record.id);
    res.status(204).end();
  });

  admin.get('/audit', async (req, res) => {
    const limit = intParameter(req.query.limit, 'limit', 1, 1000, 100);
    res.json({ entries: await deps.auditLog.recent(limit) });
  });

  admin.get('/deprecations', async (_req, res) => {
    res.json(await deps.deprecations());
  });

  admin.get('/stats', async (_req, res) => {
    const [seconds, checks, activeBans] = await Promise.all([
      deps.trafficSeconds(),
      runReadinessChecks(),
      // A store outage shows as a failing check; the ban count is then unknown, not an error.
      deps.keyLimiter.activeBans().catch(() => null),
    ]);
    const health = Object.fromEntries(checks.map(({ name, ok }) => [name, ok ? ('ok' as const) : ('failing' as const)]));
    res.json(buildStatsReport({ seconds, nowMs: (deps.clock ?? systemClock).now(), activeBans, health }));
  });

  app.use('/admin', admin);
  app.use('/console', consoleRouter());
  app.use((_req, res) => sendError(res, 'not_found', 'No such resource.'));
  app.use(errorHandler((err) => logger.error({ err }, 'unhandled admin error')));
  return app;
}
