import { loadConfig, type Config } from '../../../../src/shared/config';
import { countPlanUse, type PlanUsers } from '../../../../src/keys/plan-users';
import { planRemovalProblems } from '../../../../src/product/reload/plan-check';

/** Issue 42: a reload may not remove a plan a key uses, nor take its limits from keys that have none of their own. */
const base = (): Config => loadConfig({ env: { ADMIN_TOKEN: 'a'.repeat(40), SIGNING_SECRET: 's'.repeat(40) } });
const key = (id: string, plan: string, own = false, revoked = false) => ({
  id,
  plan,
  limits: own ? { perMinute: 1, perDay: 2 } : null,
  revokedAt: revoked ? '2026-01-01T00:00:00.000Z' : null,
});

function usersOf(records: ReturnType<typeof key>[]): PlanUsers & { asked: string[][] } {
  const asked: string[][] = [];
  return { kind: 'key', asked, plansInUse: async (plans) => (asked.push([...plans]), countPlanUse(records, plans)) };
}

describe('planRemovalProblems', () => {
  it('names a removed plan that a key uses, with how many and which; a revoked key uses none', async () => {
    const current = base();
    const next = structuredClone(current);
    delete next.plans.business;
    delete next.plans.pro;
    const users = usersOf([key('key_1', 'business'), key('key_2', 'business', true), key('key_3', 'pro', false, true)]);
    expect(await planRemovalProblems(current, next, [users])).toEqual([
      'invalid setting plans.business: is used by 2 keys (key_1, key_2); move them to another plan (or revoke them) before removing it',
    ]);
    expect(users.asked).toEqual([['pro', 'business']]);
  });

  it('names a plan that loses its limits only for keys without limits of their own', async () => {
    const current = base();
    const next = structuredClone(current);
    next.plans.pro = {};
    next.plans.free = {};
    const users = usersOf([key('key_1', 'pro'), key('key_2', 'free', true)]);
    expect(await planRemovalProblems(current, next, [users])).toEqual([
      expect.stringMatching(
        /^invalid setting plans\.pro: 1 key with no limits of its own relies on its limits \(key_1\)/,
      ),
    ]);
  });

  it('asks nobody when no plan is removed or emptied, and refuses when the users cannot be asked', async () => {
    const current = base();
    const users = usersOf([]);
    expect(await planRemovalProblems(current, structuredClone(current), [users])).toEqual([]);
    expect(users.asked).toEqual([]);
    const next = structuredClone(current);
    delete next.plans.free;
    const down: PlanUsers = { kind: 'key', plansInUse: () => Promise.reject(new Error('store unreachable')) };
    expect(await planRemovalProblems(current, next, [down])).toEqual([
      expect.stringMatching(/^invalid setting plans\.free: .*could not be checked \(store unreachable\)/),
    ]);
  });
});
