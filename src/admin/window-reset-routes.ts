import express from 'express';
import { z } from 'zod';
import { ApiError } from '../shared/errors';
import { DEFAULT_BILLING_DAY } from '../shared/constants';
import { keyRefOf } from '../limits/key-ref';
import { consumerShareOf } from '../consumers/consumer-lookup';
import type { ConsumerRecord } from '../consumers/types';
import type { ConsumerWindowLimits, KeyLimiter, WindowLimits, WindowName, WindowsHeld } from '../limits/types';
import type { RecordAudit } from './audit-trail';
import { usageView, type KeyAdministration } from './key-routes';
import { consumerUsageView, consumerView } from './consumer-routes';
import { parseBody, requireJson } from './request-parsing';
import { bodyParserForLimit } from '../shared/http/body-limit';

const WINDOW_NAMES = ['minute', 'day', 'month'] as const satisfies readonly WindowName[];

/** `{windows: [...]}`: one to three known names; a name given twice is reset once. */
const resetSchema = z.strictObject({
  windows: z
    .array(z.enum(WINDOW_NAMES))
    .min(1, 'name at least one window: minute, day or month')
    .max(WINDOW_NAMES.length * 2),
});

export interface WindowResetRouteDependencies {
  keyService: Pick<KeyAdministration, 'get' | 'effectiveLimits'>;
  consumers?: { get(id: string): Promise<ConsumerRecord | null> };
  keyLimiter: KeyLimiter;
  audit: RecordAudit;
  maxBodyBytes: () => number;
}

/** Each window reset, what it held and its limit then: the audit entry's details and the answer's `reset`. */
function heldView(
  held: WindowsHeld,
  limitOf: (window: WindowName) => number,
): Record<string, { used: number; limit: number }> {
  const view: Record<string, { used: number; limit: number }> = {};
  for (const window of WINDOW_NAMES)
    if (held[window] !== undefined) view[window] = { used: held[window], limit: limitOf(window) };
  return view;
}

function requested(body: unknown): WindowName[] {
  return [...new Set(parseBody(resetSchema, body).windows)];
}

/** The windows asked for that these limits do not have (a month without perMonth, a consumer's window without its limit). */
function missingWindows(windows: readonly WindowName[], limits: WindowLimits | ConsumerWindowLimits): WindowName[] {
  const field = { minute: 'perMinute', day: 'perDay', month: 'perMonth' } as const;
  return windows.filter((window) => limits[field[window]] === undefined);
}

/**
 * POST /admin/keys/{id}/windows/reset and POST /admin/consumers/{id}/windows/reset (CONTRACT §5):
 * the named windows start again from zero, in one store step with respect to requests in flight
 * (KeyLimiter.resetWindows), audited as `reset` with what each window held. A window the key or
 * consumer does not have is a conflict (409), as credits on a key without a month are; a revoked key
 * too: its requests are refused whatever its windows hold.
 */
export function windowResetRoutes(deps: WindowResetRouteDependencies): express.Router {
  const router = express.Router();
  const json = bodyParserForLimit(deps.maxBodyBytes, (limit) => express.json({ limit, strict: false }));
  const limiter = deps.keyLimiter;

  router.post('/keys/:id/windows/reset', requireJson, json, async (req, res) => {
    const windows = requested(req.body);
    const id = req.params.id as string;
    const record = await deps.keyService.get(id);
    if (!record) throw new ApiError('not_found', `No key with id ${id}.`);
    if (record.revokedAt !== null) throw new ApiError('conflict', `Key ${id} is revoked; its windows cannot be reset.`);
    const limits = deps.keyService.effectiveLimits(record);
    if (!limits) throw new ApiError('conflict', `Key ${id} has no windows: its plan ${record.plan} is not configured.`);
    const missing = missingWindows(windows, limits);
    if (missing.length > 0)
      throw new ApiError(
        'conflict',
        `Key ${id} has no ${missing.join(' or ')} window (neither its plan ${record.plan} nor its own limits set perMonth).`,
      );
    const key = keyRefOf(record);
    // The limits before the reset: the month's counts its credits, which the reset keeps.
    const before = await limiter.usage(key, limits, record.billingDay);
    const held = await limiter.resetWindows(key, windows, record.billingDay);
    const view = heldView(held, (window) => (window === 'month' ? before.month!.limit : before[window].limit));
    await deps.audit(req, 'reset', record.id, { windows: view });
    const usage = await limiter.usage(key, limits, record.billingDay);
    res.json({
      id: record.id,
      name: record.name,
      plan: record.plan,
      limits,
      billingDay: record.billingDay ?? DEFAULT_BILLING_DAY,
      usage: usageView(usage),
      reset: view,
    });
  });

  const consumers = deps.consumers;
  if (consumers === undefined) return router;
  router.post('/consumers/:id/windows/reset', requireJson, json, async (req, res) => {
    const windows = requested(req.body);
    const id = req.params.id as string;
    const record = await consumers.get(id);
    if (!record) throw new ApiError('not_found', `No consumer with id ${id}.`);
    const missing = missingWindows(windows, record.limits);
    const share = consumerShareOf(record);
    if (missing.length > 0 || share === undefined) {
      throw new ApiError(
        'conflict',
        `Consumer ${id} has no ${missing.join(' or ')} window (its limits set no ${missing.map((w) => ({ minute: 'perMinute', day: 'perDay', month: 'perMonth' })[w]).join(' or ')}).`,
      );
    }
    const before = await limiter.consumerUsage(share);
    const held = await limiter.resetConsumerWindows(share, windows);
    const view = heldView(held, (window) => before[window]!.limit);
    await deps.audit(req, 'reset', record.id, { windows: view });
    res.json({ ...consumerView(record), usage: consumerUsageView(await limiter.consumerUsage(share)), reset: view });
  });
  return router;
}
