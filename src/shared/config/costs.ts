/**
 * Costs against limits (CONTRACT §4): a request takes `cost` units of every window or none, so a
 * window whose whole limit is below an operation's cost could never serve it. Such a plan is a
 * configuration error, every short limit named; the admin API applies the same rule to a key's own
 * limits (`limitsBelowCost`).
 */

import { operationAt, operationNames } from '../public-api';

/** The largest weight one operation may have; far above any sane plan's minute. */
export const MAX_OPERATION_COST = 1_000_000;

const WINDOWS = ['perMinute', 'perDay', 'perMonth'] as const;

interface CostRow {
  method: string;
  path: string;
  cost: number;
}

type Issue = { path: (string | number)[]; message: string };

/** A route template under the base path, as config `costs` and `deprecations` name one: `/pets/{petId}`. */
export const ROUTE_TEMPLATE = /^\/[A-Za-z0-9_{}/-]*$/;

/**
 * One issue per row of `costs` or `deprecations` that names no operation of the operation table
 * (src/shared/public-api.ts): such a row would never apply, and a typo in it would go unseen. A
 * path that is no template is told so by the schema, and not again here.
 */
export function operationIssues(lists: {
  costs: readonly { method: string; path: string }[];
  deprecations: readonly { method: string; path: string }[];
}): Issue[] {
  const issues: Issue[] = [];
  for (const list of ['costs', 'deprecations'] as const) {
    for (const [i, row] of lists[list].entries()) {
      if (ROUTE_TEMPLATE.test(row.path) && operationAt(row.method, row.path) === undefined)
        issues.push({
          path: [list, i],
          message: `${row.method} ${row.path} is no operation of the public API (${operationNames()})`,
        });
    }
  }
  return issues;
}

type Limits = Partial<Record<(typeof WINDOWS)[number], number>>;

/** The heaviest cost rule, or null when there is none (every request costs 1). */
export function largestCost(costs: readonly CostRow[]): CostRow | null {
  let largest: CostRow | null = null;
  for (const row of costs) if (largest === null || row.cost > largest.cost) largest = row;
  return largest;
}

/** The windows of `limits` below `cost`, e.g. ["perMinute is 3"]. */
export function limitsBelowCost(limits: Limits, cost: number): string[] {
  const short: string[] = [];
  for (const window of WINDOWS) {
    const limit = limits[window];
    if (limit !== undefined && limit < cost) short.push(`${window} is ${limit}`);
  }
  return short;
}

/** One issue per plan window below the largest cost, and per cost rule given twice. */
export function costIssues(plans: Readonly<Record<string, Limits>>, costs: readonly CostRow[]): Issue[] {
  const issues: Issue[] = [];
  const seen = new Set<string>();
  for (const [i, row] of costs.entries()) {
    const id = `${row.method} ${row.path}`;
    if (seen.has(id)) issues.push({ path: ['costs', i], message: `${id} has a cost already` });
    seen.add(id);
  }
  const largest = largestCost(costs);
  if (largest === null) return issues;
  for (const [name, plan] of Object.entries(plans)) {
    for (const window of WINDOWS) {
      const limit = plan[window];
      if (limit !== undefined && limit < largest.cost) {
        issues.push({
          path: ['plans', name, window],
          message: `is ${limit}, below the cost ${largest.cost} of ${largest.method} ${largest.path}: such a request could never be served`,
        });
      }
    }
  }
  return issues;
}
