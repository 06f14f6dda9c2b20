import type { DeprecationConfig } from '../../shared/config';
import { BASE_PATH, deprecatedOperationId, operationAt } from '../../shared/public-api';

/** A deprecation from config with its instants parsed once and its headers written once. */
export interface DeprecationNotice {
  /** The operation's one id (`GET /v1/pets/{petId}`): calls are recorded and reported under it. */
  id: string;
  /** The route template, `/v1/pets/{petId}`, as metric labels name it. */
  template: string;
  sunsetAt: number;
  headers: Record<string, string>;
}

function linkHeader(successor: string, docs: string): string {
  return `<${successor}>; rel="successor-version", <${docs}>; rel="deprecation"; type="text/html"`;
}

/**
 * Builds the lookup the hot path uses: operation id → notice, for the rows of the operation table
 * (src/shared/public-api.ts) config `deprecations` names (the config's schema refuses any other).
 * Deprecation is RFC 9745 (`@<unix seconds>`), Sunset is RFC 8594 (an HTTP-date).
 */
export function buildDeprecations(entries: DeprecationConfig[]): Map<string, DeprecationNotice> {
  const notices = new Map<string, DeprecationNotice>();
  for (const entry of entries) {
    if (!operationAt(entry.method, entry.path)) throw new Error(`${entry.method} ${entry.path} is no operation`);
    const deprecatedAt = Date.parse(entry.deprecatedAt);
    const sunsetAt = Date.parse(entry.sunset);
    const template = BASE_PATH + entry.path;
    const id = deprecatedOperationId(entry.method, template);
    notices.set(id, {
      id,
      template,
      sunsetAt,
      headers: {
        Deprecation: `@${Math.floor(deprecatedAt / 1000)}`,
        Sunset: new Date(sunsetAt).toUTCString(),
        Link: linkHeader(entry.successor, entry.docs),
      },
    });
  }
  return notices;
}
