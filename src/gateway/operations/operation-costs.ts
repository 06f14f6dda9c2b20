import type { CostConfig } from '../../shared/config';
import { BASE_PATH, OPERATIONS } from '../../shared/public-api';

/**
 * What each operation costs (CONTRACT §4) as the request path reads it: route template → method →
 * units, each operation of the table (src/shared/public-api.ts) at its default cost unless config
 * `costs` gives it another. HEAD costs what GET does, as it is the same operation; a request that
 * names no operation (answered 404 or 405 later) costs 1.
 */
export class OperationCosts {
  private readonly byTemplate = new Map<string, Map<string, number>>();

  constructor(costs: readonly CostConfig[]) {
    for (const operation of OPERATIONS) this.set(operation.method, operation.path, operation.defaultCost);
    for (const row of costs) this.set(row.method, row.path, row.cost);
  }

  private set(method: string, path: string, cost: number): void {
    const template = BASE_PATH + path;
    let byMethod = this.byTemplate.get(template);
    if (!byMethod) this.byTemplate.set(template, (byMethod = new Map()));
    byMethod.set(method, cost);
  }

  /** Units a request of `method` to the route `template` takes of every window. */
  costOf(method: string, template: string | undefined): number {
    if (template === undefined) return 1;
    return this.byTemplate.get(template)?.get(method === 'HEAD' ? 'GET' : method) ?? 1;
  }
}
