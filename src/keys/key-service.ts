import type { Clock } from '../shared/clock';
import { ApiError } from '../shared/errors';
import type { WindowLimits } from '../limits/types';
import { effectiveLimits, planLimitsOf, type Plans } from '../limits/plan-limits';
import { generateApiKey, generateKeyId, hashApiKey } from './key-format';
import {
  ConsumerClosed,
  type ApiKeyRecord,
  type ImportResult,
  type KeyMove,
  type KeyPatchRequest,
  type KeyStore,
  type NewKeyInput,
} from './types';
import { ExportReader, exportLine } from './key-export';
import { recordJson, recordOfJson } from './stores/key-record-fields';
import { largestCost } from '../shared/config/costs';
import { adminFields, MAX_NAME_LENGTH, type AdminWrite } from './key-validation';
import { MAX_GRACE_SECONDS } from '../shared/constants';

/** Bounds of a rotation's grace period (CONTRACT §5); the longest is shared with the import's check. */
export { MAX_GRACE_SECONDS };
export const DEFAULT_GRACE_SECONDS = 86_400;

export { MAX_NAME_LENGTH };

/** Records a batch of an export read from a store that has no scan of its own. */
const EXPORT_CHUNK = 500;

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

/**
 * The store refused a key into a consumer whose deletion is under way (decided with the write): to
 * the caller the consumer is gone, as when the check before found none.
 */
function refuseClosedConsumer(err: unknown): never {
  if (err instanceof ConsumerClosed)
    throw invalid(`consumerId: no consumer with id ${err.consumerId} (it is being deleted).`);
  throw err;
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

  /** What the admin fields' checks read at a write: the plans, costs and instant in force. */
  private adminWrite(): AdminWrite {
    const { consumerExists } = this.options;
    return {
      plans: this.plansInForce(),
      largestCost: this.largestCost,
      now: this.clock.now(),
      ...(consumerExists ? { consumerExists } : {}),
    };
  }

  /**
   * The only place a full key exists: the caller shows `key` once and drops it. The record is the
   * admin fields as checked (key-validation.ts, ADMIN_FIELD_CHECKS) and the key's own identity,
   * read through the record's encoding, so a field left at its default is absent as a store keeps it.
   */
  async create(input: NewKeyInput): Promise<CreatedKey> {
    const fields = await adminFields(input, this.adminWrite(), 'create', (field, values) => {
      // A key has limits, its own or its plan's: said before any later field is checked.
      if (field === 'limits') this.assertHasLimits(values.plan!, values.limits!);
    });
    const key = generateApiKey(this.prefix);
    const now = this.now();
    const record = recordOfJson(
      recordJson({
        ...fields,
        id: generateKeyId(),
        hash: hashApiKey(key),
        createdAt: now,
        updatedAt: now,
        revokedAt: null,
        previousHash: null,
        previousKeyExpiresAt: null,
      } as ApiKeyRecord),
    );
    await this.store.insert(record).catch(refuseClosedConsumer);
    return { key, record };
  }

  /** `limits: null` drops the key's override (the plan's apply again); absent fields stay. */
  async update(id: string, patch: KeyPatchRequest): Promise<ApiKeyRecord | null> {
    const clean = await adminFields(patch, this.adminWrite(), 'patch');
    const current = await this.store.get(id);
    if (!current) return null;
    this.assertHasLimits(clean.plan ?? current.plan, clean.limits === undefined ? current.limits : clean.limits);
    const updated = await this.store.update(id, clean, this.now()).catch(refuseClosedConsumer);
    if (updated && updated.consumerId !== current.consumerId)
      await this.options.onConsumerMoved?.(id, current.consumerId, updated.consumerId);
    return updated;
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
    const record = await this.store.rotate(
      id,
      { hash: hashApiKey(key), previousKeyExpiresAt },
      new Date(now).toISOString(),
    );
    if (!record) return null;
    if (record.revokedAt !== null)
      throw new ApiError('conflict', `Key ${id} is revoked; a revoked key cannot be rotated.`);
    return { key, record };
  }

  get(id: string): Promise<ApiKeyRecord | null> {
    return this.store.get(id);
  }

  /**
   * Every key record as backup lines (hashes only, this environment's prefix named), handed to
   * `write` a batch at a time as the store reads them: an export of 100,000 keys is never held
   * whole, and never read in one command.
   */
  async exportBackup(write: (text: string) => Promise<void>): Promise<void> {
    const toText = (records: ApiKeyRecord[]) =>
      write(records.map((record) => exportLine(record, this.prefix) + '\n').join(''));
    if (this.store.scanRecords) return this.store.scanRecords(toText);
    const records = await this.store.list();
    for (let at = 0; at < records.length; at += EXPORT_CHUNK) await toText(records.slice(at, at + EXPORT_CHUNK));
  }

  /**
   * Loads a backup as one action: every line is checked as it arrives, as the admin API checks a
   * key (format, this environment's prefix, a plan configured here, names, instants, limits against
   * the costs in force), so a bad line (ImportLineError) imports nothing; then the store applies the
   * records whole or not at all (KeyImportConflict: a secret held by another id here).
   */
  async importBackup(lines: AsyncIterable<string> | string): Promise<ImportResult> {
    const reader = new ExportReader({
      prefix: this.prefix,
      largestCost: this.largestCost,
      now: this.clock.now(),
      check: (record) => this.importRefusal(record),
    });
    if (typeof lines === 'string') {
      for (const line of lines.split('\n')) reader.add(line);
    } else {
      for await (const line of lines) reader.add(line);
    }
    const result = await this.store.importRecords(reader.records);
    await this.moveImported(result.moved ?? []);
    return result;
  }

  /** Keys an import moved to another consumer take their windows and ban along, as a PATCH's move does. */
  private async moveImported(moves: readonly KeyMove[]): Promise<void> {
    const move = this.options.onConsumerMoved;
    if (!move) return;
    for (const { id, from, to } of moves) await move(id, from, to);
  }

  private importRefusal(record: ApiKeyRecord): string | null {
    if (!Object.hasOwn(this.plansInForce(), record.plan))
      return `plan ${record.plan} is not configured here (plans: ${Object.keys(this.plansInForce()).join(', ')})`;
    if (record.limits === null && planLimitsOf(this.plansInForce(), record.plan) === null)
      return `plan ${record.plan} is not configured here with limits of its own, and the key carries none`;
    return null;
  }

  /** Whether no key exists yet, in one command where the store can count (never a read of every key). */
  async isEmpty(): Promise<boolean> {
    return this.store.count ? (await this.store.count()) === 0 : (await this.store.list()).length === 0;
  }

  /** Records still carry `hash`; strip it (`withoutHash`) before showing them. */
  list(): Promise<ApiKeyRecord[]> {
    return this.store.list();
  }

  effectiveLimits(
    record: Pick<ApiKeyRecord, 'plan' | 'limits'>,
    plans: Plans = this.plansInForce(),
  ): WindowLimits | null {
    return effectiveLimits(record, plans);
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
