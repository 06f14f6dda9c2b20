import express from 'express';
import { ApiError } from '../shared/errors';
import { NDJSON_CONTENT_TYPE } from '../keys/key-export';
import { USAGE_EXPORT_DAYS } from '../usage/key-activity';
import { send } from './streamed-response';

const DAY_MS = 86_400_000;

/** The lines of an export of UTC days firstDay..lastDay (days since the epoch), in chunks. */
export type UsageExport = (firstDay: number, lastDay: number) => AsyncIterable<string>;

/** A `YYYY-MM-DD` query parameter as days since the epoch; else 400 invalid_parameter naming it. */
function dayParameter(value: unknown, name: string): number {
  if (value === undefined) throw new ApiError('invalid_parameter', `${name} is required: a UTC date, YYYY-MM-DD.`);
  const ms =
    typeof value === 'string' && /^\d{4}-\d{2}-\d{2}$/.test(value) ? Date.parse(`${value}T00:00:00Z`) : Number.NaN;
  // Date.parse takes 2026-02-30 for 2 March: a date must come back as it was written.
  if (Number.isNaN(ms) || new Date(ms).toISOString().slice(0, 10) !== value) {
    throw new ApiError('invalid_parameter', `${name} must be a UTC date, YYYY-MM-DD.`);
  }
  return ms / DAY_MS;
}

/**
 * GET /admin/usage/export?from&to (CONTRACT §5): NDJSON, one line per key and UTC day with
 * traffic, streamed as it is read (a million lines never sit in memory). The first chunk is read
 * before the answer starts, so a store that does not answer gets the Error body; a failure after
 * that cuts the connection, so a client never takes a short file for a whole one.
 */
export function usageExportRoutes(usageExport: UsageExport): express.Router {
  const router = express.Router();
  router.get('/usage/export', async (req, res) => {
    const firstDay = dayParameter(req.query.from, 'from');
    const lastDay = dayParameter(req.query.to, 'to');
    if (lastDay < firstDay) throw new ApiError('invalid_parameter', 'to must not be before from.');
    if (lastDay - firstDay + 1 > USAGE_EXPORT_DAYS)
      throw new ApiError('invalid_parameter', `from..to spans at most ${USAGE_EXPORT_DAYS} days.`);
    const chunks = usageExport(firstDay, lastDay)[Symbol.asyncIterator]();
    const first = await chunks.next();
    res.setHeader('Content-Type', `${NDJSON_CONTENT_TYPE}; charset=utf-8`);
    res.setHeader('Content-Disposition', `attachment; filename="usage-${req.query.from}-${req.query.to}.ndjson"`);
    try {
      if (!first.done && !(await send(res, first.value))) return;
      for (let next = await chunks.next(); !next.done; next = await chunks.next())
        if (!(await send(res, next.value))) return;
      res.end();
    } catch (err) {
      res.destroy(err as Error);
    } finally {
      await chunks.return?.();
    }
  });
  return router;
}
