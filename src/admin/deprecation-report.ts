import type { DeprecationConfig } from '../shared/config';
import type { ApiKeyRecord } from '../keys/types';
import { LOOKBACK_DAYS, type DeprecatedCaller } from '../usage/deprecation-usage';
import { BASE_PATH, deprecatedOperationId } from '../shared/public-api';

/** One deprecated operation and who called it, as `GET /admin/deprecations` shows it. */
export interface DeprecatedRouteReport {
  method: string;
  route: string;
  deprecatedAt: string;
  sunset: string;
  callers: Array<{ keyId: string; name: string | null; plan: string | null; count: number; lastCallAt: string }>;
}

export interface DeprecationReport {
  lookbackDays: number;
  routes: DeprecatedRouteReport[];
}

export interface DeprecationReportSources {
  deprecations: DeprecationConfig[];
  callers(routeId: string): Promise<DeprecatedCaller[]>;
  keyById(id: string): Promise<ApiKeyRecord | null>;
}

/**
 * Joins the recorded callers with the key records, so an operator sees a name and a plan to reach
 * before the sunset. A key deleted from the store since keeps its id with null name and plan.
 */
export async function buildDeprecationReport(sources: DeprecationReportSources): Promise<DeprecationReport> {
  const routes: DeprecatedRouteReport[] = [];
  for (const entry of sources.deprecations) {
    const route = BASE_PATH + entry.path;
    const callers = await sources.callers(deprecatedOperationId(entry.method, route));
    const records = await Promise.all(callers.map((caller) => sources.keyById(caller.keyId)));
    routes.push({
      method: entry.method,
      route,
      deprecatedAt: new Date(entry.deprecatedAt).toISOString(),
      sunset: new Date(entry.sunset).toISOString(),
      callers: callers.map((caller, i) => ({
        keyId: caller.keyId,
        name: records[i]?.name ?? null,
        plan: records[i]?.plan ?? null,
        count: caller.count,
        lastCallAt: new Date(caller.lastCallAt).toISOString(),
      })),
    });
  }
  return { lookbackDays: LOOKBACK_DAYS, routes };
}
