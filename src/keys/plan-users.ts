import type { ApiKeyRecord, KeyStore } from './types';

/** Who uses one plan: every record naming it that is not revoked, and those of them with no limits of their own. */
export interface PlanUse {
  users: number;
  /** Of `users`, those that take their limits from the plan: they break if the plan loses its limits. */
  withoutOwnLimits: number;
  /** A few ids, for the operator to find them. */
  someIds: string[];
}

/**
 * What a reload asks before it removes a plan, or takes its limits away (CONTRACT §5: refused while
 * a key or consumer uses it). Keys answer it now; consumers will be a second implementation
 * beside this one, asked the same question.
 */
export interface PlanUsers {
  /** What a user is called in the answer: "key", "consumer". */
  readonly kind: string;
  /** Of `plans`, those in use, each with who uses it; plans nobody uses are absent. */
  plansInUse(plans: readonly string[]): Promise<Map<string, PlanUse>>;
}

const SOME_IDS = 3;

/** Counts the use of `plans` among `records`; a revoked key uses no plan (its requests get 401 before any limit). */
export function countPlanUse(
  records: Iterable<Pick<ApiKeyRecord, 'id' | 'plan' | 'limits' | 'revokedAt'>>,
  plans: readonly string[],
): Map<string, PlanUse> {
  const wanted = new Set(plans);
  const uses = new Map<string, PlanUse>();
  for (const record of records) {
    if (record.revokedAt !== null || !wanted.has(record.plan)) continue;
    let use = uses.get(record.plan);
    if (!use) uses.set(record.plan, (use = { users: 0, withoutOwnLimits: 0, someIds: [] }));
    use.users += 1;
    if (record.limits === null) use.withoutOwnLimits += 1;
    if (use.someIds.length < SOME_IDS) use.someIds.push(record.id);
  }
  return uses;
}

/** The keys of `store` as plan users: read through the store's own listing, asked only when a reload removes or empties a plan. */
export function keysAsPlanUsers(store: Pick<KeyStore, 'list'>): PlanUsers {
  return {
    kind: 'key',
    plansInUse: async (plans) => (plans.length === 0 ? new Map() : countPlanUse(await store.list(), plans)),
  };
}
