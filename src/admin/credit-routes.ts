import express from 'express';
import { z } from 'zod';
import { ApiError } from '../shared/errors';
import { keyRefOf } from '../limits/key-ref';
import { DEFAULT_BILLING_DAY, MAX_CREDIT_UNITS } from '../shared/constants';
import type { KeyLimiter } from '../limits/types';
import type { RecordAudit } from './audit-trail';
import { usageView, type KeyAdministration } from './key-routes';
import { parseBody, requireJson } from './request-parsing';
import { bodyParserForLimit } from '../shared/http/body-limit';

const creditsSchema = z.strictObject({
  units: z.number().int().min(1).max(MAX_CREDIT_UNITS),
});

export interface CreditRouteDependencies {
  keyService: Pick<KeyAdministration, 'get' | 'effectiveLimits'>;
  keyLimiter: KeyLimiter;
  audit: RecordAudit;
  /** The body limit in force (config server.maxBodyBytes, which a reload may change). */
  maxBodyBytes: () => number;
}

/**
 * POST /admin/keys/{id}/credits (CONTRACT §5): one-off units on top of the key's month quota for
 * the current billing month only; they end with it. Audited. A key without a month window, or a
 * revoked one, is a conflict: there is nothing the units could be added to.
 */
export function creditRoutes(deps: CreditRouteDependencies): express.Router {
  const router = express.Router();
  const json = bodyParserForLimit(deps.maxBodyBytes, (limit) => express.json({ limit, strict: false }));
  router.post('/keys/:id/credits', requireJson, json, async (req, res) => {
    const { units } = parseBody(creditsSchema, req.body);
    const id = req.params.id as string;
    const record = await deps.keyService.get(id);
    if (!record) throw new ApiError('not_found', `No key with id ${id}.`);
    if (record.revokedAt !== null) throw new ApiError('conflict', `Key ${id} is revoked; it cannot be given credits.`);
    const limits = deps.keyService.effectiveLimits(record);
    if (!limits || limits.perMonth === undefined) {
      throw new ApiError(
        'conflict',
        `Key ${id} has no month window (neither its plan ${record.plan} nor its own limits set perMonth); credits add to a month.`,
      );
    }
    await deps.keyLimiter.addCredits(keyRefOf(record), units, record.billingDay);
    const usage = await deps.keyLimiter.usage(keyRefOf(record), limits, record.billingDay);
    await audit(req, record.id, units, usage.month?.startAt);
    res.json({
      id: record.id,
      name: record.name,
      plan: record.plan,
      limits,
      billingDay: record.billingDay ?? DEFAULT_BILLING_DAY,
      usage: usageView(usage),
    });
  });
  return router;

  function audit(req: express.Request, keyId: string, units: number, monthStart: number | undefined): Promise<void> {
    return deps.audit(req, 'credits', keyId, {
      units,
      month: monthStart === undefined ? null : new Date(monthStart).toISOString(),
    });
  }
}
