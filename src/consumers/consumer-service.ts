import type { z } from 'zod';
import type { Clock } from '../shared/clock';
import { ApiError } from '../shared/errors';
import { DEFAULT_BILLING_DAY } from '../shared/constants';
import { largestCost, limitsBelowCost } from '../shared/config/costs';
import type { ApiKeyRecord } from '../keys/types';
import type { ConsumerWindows, KeyLimiter } from '../limits/types';
import { consumerLimitsOf, generateConsumerId } from './consumer-record';
import { consumerShareOf } from './consumer-lookup';
import { deleteUnusedConsumer, type ConsumerKeys } from './consumer-deletion';
import { accessListsPatch } from '../access/access-lists';
import { instantOf, MAX_NAME_LENGTH, validName } from '../keys/key-validation';
import { IMPORT_CLOCK_SKEW_MS } from '../shared/constants';
import { consumerLineSchema } from './consumer-input';
import type { ConsumerLimits, ConsumerRecord, ConsumerStore } from './types';

/** A consumer's name follows a key's rules (src/keys/key-validation.ts): 1..200 characters after trimming, no lone surrogate. */
export const MAX_CONSUMER_NAME_LENGTH = MAX_NAME_LENGTH;

export interface NewConsumerInput {
  name: string;
  limits?: ConsumerLimits | null;
  billingDay?: number | null;
  allowedOperations?: string[] | null;
  allowedAddresses?: string[] | null;
}

export type ConsumerPatch = Partial<NewConsumerInput>;

export interface ConsumerServiceOptions {
  store: ConsumerStore;
  /**
   * Every key record, to find a consumer's keys (CONTRACT §5: `keyIds`, and no delete while one is
   * active), and closing a consumer to new keys while it is deleted (a store without: no close).
   */
  keys: ConsumerKeys;
  keyLimiter: KeyLimiter;
  clock: Clock;
  /** The costs in force: a consumer's limits must not be below the largest, as a key's. */
  costs?: () => readonly { method: string; path: string; cost: number }[];
}

function invalid(message: string): ApiError {
  return new ApiError('validation_failed', message);
}

/** The value in a schema's shape, or a 400 naming the field and what is wrong (as the routes' parseBody says it). */
function shaped<T>(schema: z.ZodType<T>, value: unknown): T {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  const issue = result.error.issues[0]!;
  throw invalid(issue.path.length > 0 ? `${issue.path.map(String).join('.')}: ${issue.message}` : issue.message);
}

/** An instant that happened by `now` (give or take another clock's skew), normalised to ISO UTC. */
function pastInstant(value: string, field: string, now: number): string {
  const at = instantOf(value);
  if (at === null) throw invalid(`${field} must be an RFC 3339 instant such as 2030-01-31T00:00:00Z.`);
  if (at > now + IMPORT_CLOCK_SKEW_MS) throw invalid(`${field} ${value} is in the future: no gateway wrote it yet.`);
  return new Date(at).toISOString();
}

/**
 * Consumers (CONTRACT §4, §5): creating, changing, deleting, credits. Shape checks are the routes'
 * (zod); what needs the config or the keys is here. Validation failures throw ApiError.
 */
export class ConsumerService {
  constructor(private readonly options: ConsumerServiceOptions) {}

  private validLimits(limits: ConsumerLimits | null | undefined): ConsumerLimits {
    const clean = consumerLimitsOf(limits);
    const largest = largestCost(this.options.costs?.() ?? [])?.cost ?? 1;
    const short = limitsBelowCost(clean, largest);
    if (short.length > 0)
      throw invalid(
        `limits below the largest operation cost ${largest} (config costs) could never serve it: ${short.join(', ')}.`,
      );
    return clean;
  }

  private now(): string {
    return new Date(this.options.clock.now()).toISOString();
  }

  async create(input: NewConsumerInput): Promise<ConsumerRecord> {
    const now = this.now();
    const lists = accessListsPatch(input);
    const record: ConsumerRecord = {
      id: generateConsumerId(),
      name: validName(input.name),
      limits: this.validLimits(input.limits),
      billingDay: input.billingDay ?? DEFAULT_BILLING_DAY,
      // Checked as a key's lists are (src/access/access-lists.ts): unknown operations, bad ranges 400.
      allowedOperations: lists.allowedOperations ?? null,
      allowedAddresses: lists.allowedAddresses ?? null,
      createdAt: now,
      updatedAt: now,
    };
    await this.options.store.put(record);
    return record;
  }

  /**
   * A backup's consumer line (its fields without `v` and `kind`) checked as POST /admin/consumers
   * checks a consumer (CONTRACT §4): the same shapes, name, limits against the costs in force and
   * access lists, and instants that exist and are not in the future. Throws ApiError (400).
   */
  fromBackup(fields: unknown): ConsumerRecord {
    const line = shaped(consumerLineSchema, fields);
    const lists = accessListsPatch(line);
    const now = this.options.clock.now();
    return {
      id: line.id,
      name: validName(line.name),
      limits: this.validLimits(line.limits),
      billingDay: line.billingDay,
      allowedOperations: lists.allowedOperations ?? null,
      allowedAddresses: lists.allowedAddresses ?? null,
      createdAt: pastInstant(line.createdAt, 'createdAt', now),
      updatedAt: pastInstant(line.updatedAt, 'updatedAt', now),
    };
  }

  get(id: string): Promise<ConsumerRecord | null> {
    return this.options.store.get(id);
  }

  list(): Promise<ConsumerRecord[]> {
    return this.options.store.list();
  }

  /** Absent fields stay; `limits: null` removes every limit; a policy list `null` removes it. */
  async update(id: string, patch: ConsumerPatch): Promise<ConsumerRecord | null> {
    const lists = accessListsPatch(patch);
    const current = await this.options.store.get(id);
    if (!current) return null;
    const next: ConsumerRecord = {
      ...current,
      name: patch.name === undefined ? current.name : validName(patch.name),
      limits: patch.limits === undefined ? current.limits : this.validLimits(patch.limits),
      billingDay: patch.billingDay === undefined ? current.billingDay : (patch.billingDay ?? DEFAULT_BILLING_DAY),
      allowedOperations: lists.allowedOperations === undefined ? current.allowedOperations : lists.allowedOperations,
      allowedAddresses: lists.allowedAddresses === undefined ? current.allowedAddresses : lists.allowedAddresses,
      updatedAt: this.now(),
    };
    await this.options.store.put(next);
    return next;
  }

  /** Ids of the keys that belong to the consumer (revoked ones too), oldest first. */
  async keysOf(id: string): Promise<ApiKeyRecord[]> {
    return (await this.options.keys.list()).filter((key) => key.consumerId === id);
  }

  /**
   * 'not_found', or a 409 while a key that is not revoked belongs to it; a key created in it (or
   * moved into it) at the same moment on any instance either makes this a 409 or is refused itself
   * (consumer-deletion.ts).
   */
  async delete(id: string): Promise<boolean> {
    const current = await this.options.store.get(id);
    if (!current) return false;
    return deleteUnusedConsumer(id, this.options.keys, () => this.options.store.delete(id));
  }

  /** The consumer's windows as they stand; empty for a consumer without limits. */
  async usage(record: ConsumerRecord): Promise<ConsumerWindows> {
    const share = consumerShareOf(record);
    return share ? this.options.keyLimiter.consumerUsage(share) : {};
  }

  /** Units on top of the consumer's month for this billing month; 409 without a month window. */
  async addCredits(record: ConsumerRecord, units: number): Promise<ConsumerWindows> {
    const share = consumerShareOf(record);
    if (!share || share.limits.perMonth === undefined) {
      throw new ApiError(
        'conflict',
        `Consumer ${record.id} has no month window (its limits set no perMonth); credits add to a month.`,
      );
    }
    await this.options.keyLimiter.addConsumerCredits(share, units);
    return this.usage(record);
  }
}
