import express from 'express';
import { z } from 'zod';
import { ApiError } from '../shared/errors';
import { MAX_CREDIT_UNITS } from '../shared/constants';
import type { ConsumerWindows } from '../limits/types';
import type { ConsumerService } from '../consumers/consumer-service';
import { consumerCreateSchema, consumerUpdateSchema } from '../consumers/consumer-input';
import type { ConsumerRecord } from '../consumers/types';
import type { RecordAudit } from './audit-trail';
import { windowView } from './key-routes';
import { parseBody, requireJson } from './request-parsing';
import { bodyParserForLimit } from '../shared/http/body-limit';

/** The bodies' shapes are shared with a backup's consumer lines (src/consumers/consumer-input.ts). */
const createSchema = consumerCreateSchema;
const updateSchema = consumerUpdateSchema;
const creditsSchema = z.strictObject({ units: z.number().int().min(1).max(MAX_CREDIT_UNITS) });

export interface ConsumerRouteDependencies {
  consumers: ConsumerService;
  audit: RecordAudit;
  maxBodyBytes: () => number;
}

/** A consumer as the admin API shows it (CONTRACT §5). */
export function consumerView(record: ConsumerRecord) {
  return {
    id: record.id,
    name: record.name,
    limits: record.limits,
    billingDay: record.billingDay,
    allowedOperations: record.allowedOperations,
    allowedAddresses: record.allowedAddresses,
    createdAt: record.createdAt,
    updatedAt: record.updatedAt,
  };
}

/** A consumer's windows as the admin API shows them: those it has limits for. */
export function consumerUsageView(windows: ConsumerWindows) {
  const view: Record<string, unknown> = {};
  if (windows.minute) view.minute = windowView(windows.minute);
  if (windows.day) view.day = windowView(windows.day);
  if (windows.month)
    view.month = {
      ...windowView(windows.month),
      credits: windows.month.credits,
      startsAt: new Date(windows.month.startAt).toISOString(),
    };
  return view;
}

const notFound = (id: unknown) => new ApiError('not_found', `No consumer with id ${String(id)}.`);

/** /admin/consumers (CONTRACT §5): reads, writes and credits, each write audited under the consumer's id. */
export function consumerRoutes(deps: ConsumerRouteDependencies): express.Router {
  const { consumers, audit } = deps;
  const router = express.Router();
  const json = bodyParserForLimit(deps.maxBodyBytes, (limit) => express.json({ limit, strict: false }));
  const load = async (id: string) => (await consumers.get(id)) ?? Promise.reject(notFound(id));

  router.get('/consumers', async (_req, res) => {
    res.json((await consumers.list()).map(consumerView));
  });
  router.get('/consumers/:id', async (req, res) => {
    const record = await load(req.params.id as string);
    const [keys, usage] = await Promise.all([consumers.keysOf(record.id), consumers.usage(record)]);
    res.json({ ...consumerView(record), keyIds: keys.map((k) => k.id), usage: consumerUsageView(usage) });
  });
  router.post('/consumers', requireJson, json, async (req, res) => {
    const record = await consumers.create(parseBody(createSchema, req.body));
    await audit(req, 'create', record.id, { name: record.name, limits: record.limits, billingDay: record.billingDay });
    res.status(201).json(consumerView(record));
  });
  router.patch('/consumers/:id', requireJson, json, async (req, res) => {
    const patch = parseBody(updateSchema, req.body);
    const record = await consumers.update(req.params.id as string, patch);
    if (!record) throw notFound(req.params.id);
    const details: Record<string, unknown> = {};
    for (const field of Object.keys(patch) as Array<keyof typeof patch>) details[field] = record[field];
    await audit(req, 'update', record.id, details);
    res.json(consumerView(record));
  });
  router.delete('/consumers/:id', async (req, res) => {
    if (!(await consumers.delete(req.params.id as string))) throw notFound(req.params.id);
    await audit(req, 'delete', req.params.id as string);
    res.status(204).end();
  });
  router.post('/consumers/:id/credits', requireJson, json, async (req, res) => {
    const { units } = parseBody(creditsSchema, req.body);
    const record = await load(req.params.id as string);
    const usage = await consumers.addCredits(record, units);
    await audit(req, 'credits', record.id, {
      units,
      month: usage.month ? new Date(usage.month.startAt).toISOString() : null,
    });
    res.json({ ...consumerView(record), usage: consumerUsageView(usage) });
  });
  return router;
}
