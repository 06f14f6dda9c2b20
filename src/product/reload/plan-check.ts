import type { Config } from '../../shared/config';
import { planLimitsOf } from '../../limits/plan-limits';
import type { PlanUse, PlanUsers } from '../../keys/plan-users';

const counted = (n: number, kind: string) => `${n} ${kind}${n === 1 ? '' : 's'}`;
const examples = (use: PlanUse) => ` (${use.someIds.join(', ')}${use.users > use.someIds.length ? ', …' : ''})`;

/**
 * What a reload may not do to a plan that is in use (CONTRACT §5): remove it, or take its limits
 * away from users that have none of their own. Either would leave their requests without limits
 * (answered 503 since issue 42, a 500 before). One line per plan, in the config error's shape, so
 * that the 400 names `plans.<name>`; an empty list when the change is safe.
 */
export async function planRemovalProblems(
  current: Config,
  next: Config,
  users: readonly PlanUsers[],
): Promise<string[]> {
  const removed = Object.keys(current.plans).filter((name) => !Object.hasOwn(next.plans, name));
  const emptied = Object.keys(current.plans).filter(
    (name) => Object.hasOwn(next.plans, name) && planLimitsOf(current.plans, name) && !planLimitsOf(next.plans, name),
  );
  if (removed.length === 0 && emptied.length === 0) return [];
  const problems: string[] = [];
  for (const source of users) {
    let uses: Map<string, PlanUse>;
    try {
      uses = await source.plansInUse([...removed, ...emptied]);
    } catch (err) {
      for (const name of [...removed, ...emptied])
        problems.push(
          `invalid setting plans.${name}: cannot be removed or emptied now: whether a ${source.kind} uses it could not be checked (${(err as Error).message})`,
        );
      continue;
    }
    for (const name of removed) {
      const use = uses.get(name);
      if (use)
        problems.push(
          `invalid setting plans.${name}: is used by ${counted(use.users, source.kind)}${examples(use)}; move them to another plan (or revoke them) before removing it`,
        );
    }
    for (const name of emptied) {
      const use = uses.get(name);
      if (use && use.withoutOwnLimits > 0) {
        problems.push(
          `invalid setting plans.${name}: ${counted(use.withoutOwnLimits, source.kind)} with no limits of its own rel${use.withoutOwnLimits === 1 ? 'ies' : 'y'} on its limits${examples(use)}; give them limits or another plan first`,
        );
      }
    }
  }
  return problems;
}
