import type { CostConfig } from '../../shared/config';
import { BASE_PATH } from '../../shared/public-api';

/**
 * Config `costs` (CONTRACT §4) as the request path reads it: route template → method → cost. An
 * operation not listed costs 1; HEAD costs what GET does, as it is the same operation.
 */
export class OperationCosts {
  private readonly byTemplate = new Map<string, Map<string, number>>();

  constructor(costs: readonly CostConfig[]) {
    for (const row of costs) {
      const template = BASE_PATH + row.path;
      let byMethod = this.byTemplate.get(template);
      if (!byMethod) this.byTemplate.set(template, (byMethod = new Map()));
      byMethod.set(row.method, row.cost);
    }
  }

  /** Units a request of `method` to the route `template` takes of every window. */
  costOf(method: string, template: string | undefined): number {
    if (this.byTemplate.size === 0 || template === undefined) return 1;
    return this.byTemplate.get(template)?.get(method === 'HEAD' ? 'GET' : method) ?? 1;
  }
}
