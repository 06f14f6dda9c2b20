import { z } from 'zod';
import { MAX_BILLING_DAY, MIN_BILLING_DAY } from '../shared/constants';
import { CONSUMER_ID_PATTERN } from './consumer-record';

/**
 * The shapes a consumer is written in (CONTRACT §5): the admin API's bodies and a backup's consumer
 * lines, one definition for both, so that an import refuses what POST /admin/consumers refuses
 * (CONTRACT §4). What needs the config (limits against costs) or the access lists' own rules is
 * ConsumerService's.
 */

const positive = z.number().int().min(1).max(Number.MAX_SAFE_INTEGER);
/** `hiddenWindows`: which of the consumer's windows no header names (CONTRACT §4; `minute` hides `consumer-minute`). */
const hiddenWindows = z.array(z.enum(['minute', 'day', 'month'])).max(3);
const limitsSchema = z.strictObject({
  perMinute: positive.optional(),
  perDay: positive.optional(),
  perMonth: positive.optional(),
  hiddenWindows: hiddenWindows.optional(),
});
/** Stored for the access-policy step (CONTRACT §4), which checks the entries themselves. */
const policyList = z.array(z.string().min(1).max(100)).max(1000).nullable().optional();
const billingDay = z.number().int().min(MIN_BILLING_DAY).max(MAX_BILLING_DAY);
const fields = {
  limits: limitsSchema.nullable().optional(),
  billingDay: billingDay.nullable().optional(),
  allowedOperations: policyList,
  allowedAddresses: policyList,
};

export const consumerCreateSchema = z.strictObject({ name: z.string(), ...fields });
export const consumerUpdateSchema = z.strictObject({ name: z.string().optional(), ...fields });

/** A backup's consumer line without `v` and `kind`: every field the export writes, and no other. */
export const consumerLineSchema = z.strictObject({
  id: z.string().regex(CONSUMER_ID_PATTERN, 'must be con_ and 24 hex digits'),
  name: z.string(),
  limits: limitsSchema,
  billingDay,
  allowedOperations: policyList,
  allowedAddresses: policyList,
  createdAt: z.string(),
  updatedAt: z.string(),
});
export type ConsumerLine = z.infer<typeof consumerLineSchema>;
