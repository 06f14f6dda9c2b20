import express from 'express';
import { ApiError } from '../../shared/errors';
import { intParameter } from '../request-parsing';
import { TOP_KEYS_SPANS_MINUTES, type BusyKey } from '../../usage/top-keys';

export interface TopKeysDependencies {
  /** The busiest keys over the last `minutes` minutes across every instance (src/usage/top-keys.ts). */
  top(minutes: number, limit: number): Promise<BusyKey[]>;
  /** A key's record, for its name (and its consumer, once consumers exist). */
  keyById(id: string): Promise<{ name: string; consumerId?: string | null } | null>;
}

/** GET /admin/stats/top-keys?minutes=5|60&limit=N (CONTRACT §5), most requests first. */
export function topKeysRoute(deps: TopKeysDependencies): express.Router {
  const router = express.Router();
  router.get('/stats/top-keys', async (req, res) => {
    const minutes = req.query.minutes ?? '5';
    if (!TOP_KEYS_SPANS_MINUTES.some((span) => String(span) === minutes)) {
      throw new ApiError('invalid_parameter', `minutes must be ${TOP_KEYS_SPANS_MINUTES.join(' or ')}.`);
    }
    const limit = intParameter(req.query.limit, 'limit', 1, 100, 20);
    const busy = await deps.top(Number(minutes), limit);
    const records = await Promise.all(busy.map((b) => deps.keyById(b.keyId)));
    res.json({
      keys: busy.map((b, i) => ({
        keyId: b.keyId,
        name: records[i]?.name ?? null,
        consumerId: records[i]?.consumerId ?? null,
        requests: b.requests,
        rateLimited: b.rateLimited,
      })),
    });
  });
  return router;
}
