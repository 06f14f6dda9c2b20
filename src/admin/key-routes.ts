import express from 'express';
import { z } from 'zod';
import { ApiError } from '../shared/errors';
import { keyRefOf } from '../limits/key-ref';
import type { ApiKeyRecord, KeyPatchRequest, NewKeyInput } from '../keys/types';
import type { KeyLimiter, KeyUsage, WindowLimits, WindowState } from '../limits/types';
import { DEFAULT_BILLING_DAY, MAX_BILLING_DAY, MIN_BILLING_DAY } from '../shared/constants';
import type { RecordAudit } from './audit-trail';
import { hasBody, intParameter, parseBody, requireJson } from './request-parsing';
import { bodyParserForLimit } from '../shared/http/body-limit';
import { accessListsView } from '../access/access-lists';

/** What the key routes need from the key service. */
export interface KeyAdministration {
  create(input: NewKeyInput): Promise<{ key: string; record: ApiKeyRecord }>;
  get(id: string): Promise<ApiKeyRecord | null>;
  list(): Promise<ApiKeyRecord[]>;
  update(id: string, patch: KeyPatchRequest): Promise<ApiKeyRecord | null>;
  revoke(id: string): Promise<ApiKeyRecord | null>;
  /** Null for an unknown id; throws ApiError('conflict') for a revoked key. */
  rotate(id: string, graceSeconds?: number): Promise<{ key: string; record: ApiKeyRecord } | null>;
  effectiveLimits(record: ApiKeyRecord): WindowLimits | null;
}

/** Each key's use, as counted off the request path (src/usage/key-activity.ts). */
export interface KeyUsageHistory {
  usage(
    keyId: string,
    days: number,
  ): Promise<{ keyId: string; days: Array<{ date: string; admitted: number; rateLimited: number; banned: number }> }>;
  lastUsed(keyIds: readonly string[]): Promise<Map<string, number>>;
}

export interface KeyRouteDependencies {
  keyService: KeyAdministration;
  keyLimiter: KeyLimiter;
  keyActivity: KeyUsageHistory;
  audit: RecordAudit;
  /** The body limit in force (config server.maxBodyBytes, which a reload may change). */
  maxBodyBytes: () => number;
  /** After a revocation: the `key.revoked` webhook (`by: "admin"`). */
  onRevoked?: (record: ApiKeyRecord) => void;
}

const limitsSchema = z.strictObject({
  perMinute: z.number().int().min(1).max(Number.MAX_SAFE_INTEGER),
  perDay: z.number().int().min(1).max(Number.MAX_SAFE_INTEGER),
  /** A month window of the key's own (CONTRACT §4). */
  perMonth: z.number().int().min(1).max(Number.MAX_SAFE_INTEGER).optional(),
  /** Shadow mode for this key (CONTRACT §4); absent, the key follows its plan. */
  shadow: z.boolean().optional(),
  /** Requests of this key forwarded at once, across instances (CONTRACT §3); absent, the plan's. */
  maxInFlight: z.number().int().min(1).max(10_000).optional(),
  /** Windows enforced but shown in no header (CONTRACT §4); absent, the plan's. */
  hiddenWindows: z
    .array(z.enum(['minute', 'day', 'month']))
    .max(3)
    .optional(),
});
/** Access policy lists (CONTRACT §4): checked by src/access/access-lists.ts, whose 400 names each bad entry. */
const accessListFields = {
  allowedOperations: z.unknown().optional(),
  allowedAddresses: z.unknown().optional(),
};
const createKeySchema = z.strictObject({
  ...accessListFields,
  name: z.string(),
  plan: z.string(),
  limits: limitsSchema.nullable().optional(),
  expiresAt: z.string().nullable().optional(),
  /** Day of the month (00:00 UTC) the key's month window starts on. */
  billingDay: z.number().int().min(MIN_BILLING_DAY).max(MAX_BILLING_DAY).nullable().optional(),
  /** The consumer whose shared windows the key also counts in (CONTRACT §4); null or absent: none. */
  consumerId: z.string().max(100).nullable().optional(),
});
const updateKeySchema = z.strictObject({
  ...accessListFields,
  name: z.string().optional(),
  plan: z.string().optional(),
  limits: limitsSchema.nullable().optional(),
  expiresAt: z.string().nullable().optional(),
  /** Moves the key to this consumer; null: to none. Its own windows go with it. */
  consumerId: z.string().max(100).nullable().optional(),
});
const rotateKeySchema = z.strictObject({
  graceSeconds: z.number().int().min(0).max(604_800).optional(),
});

export const windowView = (w: WindowState) => ({
  limit: w.limit,
  remaining: w.remaining,
  reset: Math.ceil(w.resetAt / 1000),
});

/** A key's windows as the admin API shows them: the month (with its credits) only when the key has one. */
export function usageView(usage: KeyUsage) {
  const view: Record<string, unknown> = { minute: windowView(usage.minute), day: windowView(usage.day) };
  if (usage.month)
    view.month = {
      ...windowView(usage.month),
      credits: usage.month.credits,
      startsAt: new Date(usage.month.startAt).toISOString(),
    };
  return view;
}
const notFound = (id: unknown) => new ApiError('not_found', `No key with id ${String(id)}.`);

/** A key as GET /admin/keys lists it: never the key or its hash. */
function publicView(keys: KeyAdministration, record: ApiKeyRecord, lastUsed: Map<string, number>) {
  const lastUsedAt = lastUsed.get(record.id);
  const limits = keys.effectiveLimits(record);
  return {
    id: record.id,
    name: record.name,
    plan: record.plan,
    limits,
    createdAt: record.createdAt,
    revokedAt: record.revokedAt,
    expiresAt: record.expiresAt,
    ...billingDayView(record, limits),
    consumerId: record.consumerId ?? null,
    ...accessListsView(record),
    lastUsedAt: lastUsedAt === undefined ? null : new Date(lastUsedAt).toISOString(),
  };
}

/**
 * `billingDay` where it means something: a key with a month window, or one given a billing day of
 * its own. Keys of plans without a month answer exactly as before month quotas existed.
 */
export function billingDayView(record: ApiKeyRecord, limits: WindowLimits | null): { billingDay?: number } {
  if (record.billingDay === undefined && limits?.perMonth === undefined) return {};
  return { billingDay: record.billingDay ?? DEFAULT_BILLING_DAY };
}

/** The key lifecycle under /admin/keys (CONTRACT §5): reads, then writes, each audited. */
export function keyRoutes(deps: KeyRouteDependencies): express.Router {
  const router = express.Router();
  addKeyReads(router, deps);
  addKeyWrites(router, deps);
  return router;
}

async function loadKey(keys: KeyAdministration, id: string): Promise<ApiKeyRecord> {
  const record = await keys.get(id);
  if (!record) throw notFound(id);
  return record;
}

function addKeyReads(router: express.Router, deps: KeyRouteDependencies): void {
  const { keyService: keys, keyActivity } = deps;
  router.get('/keys', async (_req, res) => {
    const records = await keys.list();
    const lastUsed = await keyActivity.lastUsed(records.map((r) => r.id));
    res.json(records.map((record) => publicView(keys, record, lastUsed)));
  });
  router.get('/keys/:id', async (req, res) => {
    const record = await loadKey(keys, req.params.id as string);
    const limits = keys.effectiveLimits(record);
    // A key whose plan is not configured any more has no windows to show; the operator sees it here and moves it.
    const usage = limits && (await deps.keyLimiter.usage(keyRefOf(record), limits, record.billingDay));
    res.json({
      ...publicView(keys, record, await keyActivity.lastUsed([record.id])),
      usage: usage && usageView(usage),
      bannedUntil: usage && usage.bannedUntil !== null ? new Date(usage.bannedUntil).toISOString() : null,
      previousKeyExpiresAt: record.previousKeyExpiresAt,
    });
  });
  router.get('/keys/:id/usage', async (req, res) => {
    const days = intParameter(req.query.days, 'days', 1, 90, 30);
    const record = await loadKey(keys, req.params.id as string);
    res.json(await keyActivity.usage(record.id, days));
  });
}

function addKeyWrites(router: express.Router, deps: KeyRouteDependencies): void {
  const { keyService: keys, audit } = deps;
  const json = bodyParserForLimit(deps.maxBodyBytes, (limit) => express.json({ limit, strict: false }));
  const viewOf = async (record: ApiKeyRecord) => publicView(keys, record, await deps.keyActivity.lastUsed([record.id]));

  router.post('/keys', requireJson, json, async (req, res) => {
    const { key, record } = await keys.create(parseBody(createKeySchema, req.body));
    const limits = keys.effectiveLimits(record);
    const billingDay = billingDayView(record, limits);
    const consumerId = record.consumerId ?? null;
    const accessLists = accessListsView(record);
    await audit(req, 'create', record.id, {
      name: record.name,
      plan: record.plan,
      limits,
      expiresAt: record.expiresAt,
      ...billingDay,
      consumerId,
      ...accessLists,
    });
    res.status(201).json({
      id: record.id,
      key,
      name: record.name,
      plan: record.plan,
      limits,
      createdAt: record.createdAt,
      expiresAt: record.expiresAt,
      ...billingDay,
      consumerId,
      ...accessLists,
    });
  });
  router.post('/keys/:id/rotate', json, async (req, res) => {
    // The body is optional ({graceSeconds} has a default); one that is sent must be JSON.
    const withBody = hasBody(req);
    if (withBody && !req.is('application/json'))
      throw new ApiError('unsupported_media_type', 'Send the body as application/json.');
    const { graceSeconds } = parseBody(rotateKeySchema, withBody ? req.body : {});
    const rotated = await keys.rotate(req.params.id as string, graceSeconds);
    if (!rotated) throw notFound(req.params.id);
    const { key, record } = rotated;
    await audit(req, 'rotate', record.id, {
      graceSeconds: graceSeconds ?? null,
      previousKeyExpiresAt: record.previousKeyExpiresAt,
    });
    res.status(201).json({ ...(await viewOf(record)), key, previousKeyExpiresAt: record.previousKeyExpiresAt });
  });
  router.patch('/keys/:id', requireJson, json, async (req, res) => {
    const patch = parseBody(updateKeySchema, req.body);
    const record = await keys.update(req.params.id as string, patch);
    if (!record) throw notFound(req.params.id);
    // What was asked for, as stored (an expiry normalised to UTC).
    const details: Record<string, unknown> = {};
    // A list removed (null) or a consumer left (null) is absent from the record: the audit says null.
    for (const field of Object.keys(patch) as Array<keyof typeof patch>) details[field] = record[field] ?? null;
    await audit(req, 'update', record.id, details);
    res.json(await viewOf(record));
  });
  router.delete('/keys/:id', async (req, res) => {
    const record = await keys.revoke(req.params.id as string);
    if (!record) throw notFound(req.params.id);
    await audit(req, 'revoke', record.id, { revokedAt: record.revokedAt, by: 'admin' });
    deps.onRevoked?.(record);
    res.status(204).end();
  });
  router.delete('/keys/:id/ban', async (req, res) => {
    const record = await loadKey(keys, req.params.id as string);
    await deps.keyLimiter.unban(keyRefOf(record));
    await audit(req, 'unban', record.id);
    res.status(204).end();
  });
}
