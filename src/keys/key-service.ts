import type { Clock } from '../shared/clock';
import { ApiError } from '../shared/errors';
import type { WindowLimits } from '../limits/types';
import { effectiveLimits, planLimitsOf, type Plans } from '../limits/plan-limits';
import { generateApiKey, generateKeyId, hashApiKey } from './key-format';
import type { ApiKeyRecord, ImportResult, KeyPatch, KeyStore, NewKeyInput } from './types';
import { exportLine, parseExport } from './key-export';
import { billingDayOf, limitsOf } from './record';
import { isBillingDay } from '../limits/month-window';
import { MAX_BILLING_DAY, MIN_BILLING_DAY } from '../shared/constants';
import { largestCost, limitsBelowCost } from '../shared/config/costs';

/** Bounds of a rotation's grace period (CONTRACT §5). */
export const MAX_GRACE_SECONDS = 604_800;
export const DEFAULT_GRACE_SECONDS = 86_400;


export const MAX_NAME_LENGTH = 200;

export interface CreatedKey {
  /** The full key: shown once, never stored, not recoverable. */
  key: string;
  record: ApiKeyRecord;
}

export interface KeyServiceOptions {
  store: KeyStore;
  /** This environment's key prefix (config `keys.prefix`). */
  prefix: string;
  /** The plans in force (config `plans`, which a reload may change): asked on every use. */
  plans: () => Plans;
  clock: Clock;
  /**
   * The costs in force (config `costs`, which a reload may change with the plans): a key's own
   * limits must not be below the largest (CONTRACT §4). Asked at each write. Default: none.
   */
  costs?: () => readonly { method: string; path: string; cost: number }[];
  /** Whether a consumer exists (src/consumers): a key's `consumerId` must name one. Absent: none does. */
  consumerExists?: (id: string) => Promise<boolean>;
  /**
   * A key moved from one consumer (or none) to another (or none), after the store has it: its
   * windows follow it (src/consumers/key-moves.ts), so a move never resets a count.
   */
  onConsumerMoved?: (keyId: string, from: string | undefined, to: string | undefined) => Promise<void>;
}

function invalid(message: string): ApiError {
  return new ApiError('validation_failed', message);
}

function validName(name: unknown): string {
  if (typeof name !== 'string') throw invalid('name must be a string.');
  const trimmed = name.trim();
  if (trimmed.length < 1 || trimmed.length > MAX_NAME_LENGTH) {
    throw invalid(`name must be 1 to ${MAX_NAME_LENGTH} characters.`);
  }
  return trimmed;
}

const LIMIT_FIELDS = new Set(['perMinute', 'perDay', 'perMonth', 'shadow']);

function validLimits(limits: unknown, largestCost: number): WindowLimits {
  const l = limits as Partial<WindowLimits> | null;
  if (typeof l !== 'object' || l === null || Array.isArray(l)) {
    throw invalid('limits must be an object {perMinute, perDay, perMonth?}.');
  }
  for (const field of ['perMinute', 'perDay', 'perMonth'] as const) {
    const value = l[field];
    if (field === 'perMonth' && value === undefined) continue;
    if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 1) {
      throw invalid(`limits.${field} must be a positive integer.`);
    }
  }
  if (l.shadow !== undefined && typeof l.shadow !== 'boolean') throw invalid('limits.shadow must be true or false.');
  const extra = Object.keys(l).filter((k) => !LIMIT_FIELDS.has(k));
  if (extra.length > 0) throw invalid(`limits has unknown field ${extra[0]}.`);
  // A request takes its cost of every window or nothing: a window below the largest cost could never serve it.
  const short = limitsBelowCost(l, largestCost);
  if (short.length > 0) throw invalid(`limits below the largest operation cost ${largestCost} (config costs) could never serve it: ${short.join(', ')}.`);
  return limitsOf(l.perMinute!, l.perDay!, l.shadow, l.perMonth);
}

function validBillingDay(value: unknown): number | undefined {
  if (value === undefined || value === null) return undefined;
  if (!isBillingDay(value)) throw invalid(`billingDay must be a whole number from ${MIN_BILLING_DAY} to ${MAX_BILLING_DAY}.`);
  return value;
}

/** RFC 3339 with a zone (Z or ±hh:mm), the shape `expiresAt` must have. */
const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/i;

/** Date.parse rolls 2030-02-31 over into March; RFC 3339 says such a date does not exist. */
function realCalendarDate(value: string): boolean {
  const [y, m, d, h, min, sec] = [0, 5, 8, 11, 14, 17].map((at) => Number(value.slice(at, at === 0 ? 4 : at + 2)));
  const day = new Date(Date.UTC(y!, m! - 1, d!));
  return day.getUTCMonth() === m! - 1 && day.getUTCDate() === d && h! <= 23 && min! <= 59 && sec! <= 59;
}

/** A future RFC 3339 instant, normalised to ISO UTC. */
function validExpiry(value: unknown, now: number): string {
  if (typeof value !== 'string' || !RFC3339.test(value) || Number.isNaN(Date.parse(value)) || !realCalendarDate(value)) {
    throw invalid('expiresAt must be an RFC 3339 instant such as 2030-01-31T00:00:00Z.');
  }
  const at = Date.parse(value);
  if (at <= now) throw invalid('expiresAt must be in the future.');
  return new Date(at).toISOString();
}

/**
 * Creating, changing and revoking keys: what the admin API and the development bootstrap call.
 * Validation failures throw ApiError('validation_failed'); an unknown id returns null.
 */
export class KeyService {
  private readonly store: KeyStore;
  private readonly prefix: string;
  private readonly plansInForce: () => Plans;
  private readonly clock: Clock;
  private readonly costsInForce: () => readonly { method: string; path: string; cost: number }[];
  private readonly options: KeyServiceOptions;

  constructor(options: KeyServiceOptions) {
    this.options = options;
    this.costsInForce = options.costs ?? (() => []);
    this.store = options.store;
    this.prefix = options.prefix;
    this.plansInForce = options.plans;
    this.clock = options.clock;
  }

  /** The largest cost in force, read at each write: a reload may change the costs. */
  private get largestCost(): number {
    return largestCost(this.costsInForce())?.cost ?? 1;
  }

  /** The only place a full key exists: the caller shows `key` once and drops it. */
  async create(input: NewKeyInput): Promise<CreatedKey> {
    const name = validName(input.name);
    const plan = this.validPlan(input.plan);
    const limits = input.limits === undefined || input.limits === null ? null : validLimits(input.limits, this.largestCost);
    this.assertHasLimits(plan, limits);
    const billingDay = validBillingDay(input.billingDay);
    const expiresAt = input.expiresAt === undefined || input.expiresAt === null ? null : validExpiry(input.expiresAt, this.clock.now());
    const consumerId = await this.validConsumer(input.consumerId);

    const key = generateApiKey(this.prefix);
    const now = this.now();
    const record: ApiKeyRecord = {
      id: generateKeyId(),
      name,
      plan,
      limits,
      hash: hashApiKey(key),
      createdAt: now,
      updatedAt: now,
      revokedAt: null,
      expiresAt,
      previousHash: null,
      previousKeyExpiresAt: null,
      ...billingDayOf(billingDay),
      ...(consumerId ? { consumerId } : {}),
    };
    await this.store.insert(record);
    return { key, record };
  }

  /** `limits: null` drops the key's override (the plan's apply again); absent fields stay. */
  async update(id: string, patch: KeyPatch): Promise<ApiKeyRecord | null> {
    const clean: KeyPatch = {};
    if (patch.name !== undefined) clean.name = validName(patch.name);
    if (patch.plan !== undefined) clean.plan = this.validPlan(patch.plan);
    if (patch.limits !== undefined) clean.limits = patch.limits === null ? null : validLimits(patch.limits, this.largestCost);
    if (patch.expiresAt !== undefined) clean.expiresAt = patch.expiresAt === null ? null : validExpiry(patch.expiresAt, this.clock.now());
    if (patch.consumerId !== undefined) clean.consumerId = (await this.validConsumer(patch.consumerId)) ?? null;

    const current = await this.store.get(id);
    if (!current) return null;
    this.assertHasLimits(clean.plan ?? current.plan, clean.limits === undefined ? current.limits : clean.limits);
    const updated = await this.store.update(id, clean, this.now());
    if (updated && updated.consumerId !== current.consumerId) await this.options.onConsumerMoved?.(id, current.consumerId, updated.consumerId);
    return updated;
  }

  /** A consumer id that exists, or undefined for none; an unknown one is 400. */
  private async validConsumer(value: unknown): Promise<string | undefined> {
    if (value === undefined || value === null) return undefined;
    if (typeof value !== 'string' || !(await this.options.consumerExists?.(value))) throw invalid(`consumerId: no consumer with id ${String(value)}.`);
    return value;
  }

  /** Revokes for good; revoking again keeps the first `revokedAt`. */
  revoke(id: string): Promise<ApiKeyRecord | null> {
    return this.store.revoke(id, this.now());
  }

  /**
   * A new secret for the same key (same id, so the same windows, ban and usage); the current secret
   * stays admitted for `graceSeconds`. Null for an unknown id; a revoked key is a conflict.
   */
  async rotate(id: string, graceSeconds: number = DEFAULT_GRACE_SECONDS): Promise<CreatedKey | null> {
    if (!Number.isSafeInteger(graceSeconds) || graceSeconds < 0 || graceSeconds > MAX_GRACE_SECONDS) {
      throw invalid(`graceSeconds must be an integer from 0 to ${MAX_GRACE_SECONDS}.`);
    }
    const key = generateApiKey(this.prefix);
    const now = this.clock.now();
    const previousKeyExpiresAt = new Date(now + graceSeconds * 1000).toISOString();
    const record = await this.store.rotate(id, { hash: hashApiKey(key), previousKeyExpiresAt }, new Date(now).toISOString());
    if (!record) return null;
    if (record.revokedAt !== null) throw new ApiError('conflict', `Key ${id} is revoked; a revoked key cannot be rotated.`);
    return { key, record };
  }

  get(id: string): Promise<ApiKeyRecord | null> {
    return this.store.get(id);
  }

  /** Every key record as a backup line (hashes only, this environment's prefix named). */
  async exportLines(): Promise<string[]> {
    return (await this.store.list()).map((record) => exportLine(record, this.prefix));
  }

  /**
   * Loads a backup: every line is checked first (format, this environment's prefix, a plan this
   * config knows), so a bad line (ImportLineError) or a secret held by another id here
   * (KeyImportConflict) imports nothing.
   */
  importBackup(body: string): Promise<ImportResult> {
    const records = parseExport(body, this.prefix, (record) =>
      record.limits === null && planLimitsOf(this.plansInForce(), record.plan) === null ? `plan ${record.plan} is not configured here with limits of its own, and the key carries none` : null,
    );
    return this.store.importRecords(records);
  }

  /** Records still carry `hash`; strip it (`withoutHash`) before showing them. */
  list(): Promise<ApiKeyRecord[]> {
    return this.store.list();
  }

  effectiveLimits(record: Pick<ApiKeyRecord, 'plan' | 'limits'>, plans: Plans = this.plansInForce()): WindowLimits | null {
    return effectiveLimits(record, plans);
  }

  private validPlan(plan: unknown): string {
    const plans = this.plansInForce();
    if (typeof plan !== 'string' || !Object.hasOwn(plans, plan)) {
      const known = Object.keys(plans).join(', ');
      throw invalid(`plan must be one of ${known}.`);
    }
    return plan;
  }

  private assertHasLimits(plan: string, limits: WindowLimits | null): void {
    if (limits === null && planLimitsOf(this.plansInForce(), plan) === null) {
      throw invalid(`plan ${plan} has no limits of its own: the key must carry limits {perMinute, perDay}.`);
    }
  }

  private now(): string {
    return new Date(this.clock.now()).toISOString();
  }
}
