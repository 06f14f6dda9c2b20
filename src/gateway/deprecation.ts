import type { DeprecationConfig } from '../shared/config';

/** A deprecation from config with its instants parsed once and its headers written once. */
export interface DeprecationNotice {
  sunsetAt: number;
  headers: Record<string, string>;
}

function linkHeader(successor: string, docs: string): string {
  return `<${successor}>; rel="successor-version", <${docs}>; rel="deprecation"; type="text/html"`;
}

/**
 * Builds the lookup the hot path uses: `METHOD /relative/template` → notice. Deprecation is
 * RFC 9745 (`@<unix seconds>`), Sunset is RFC 8594 (an HTTP-date).
 */
export function buildDeprecations(entries: DeprecationConfig[]): Map<string, DeprecationNotice> {
  const notices = new Map<string, DeprecationNotice>();
  for (const entry of entries) {
    const deprecatedAt = Date.parse(entry.deprecatedAt);
    const sunsetAt = Date.parse(entry.sunset);
    notices.set(deprecationKey(entry.method, entry.path), {
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

/** HEAD shares GET's deprecation: it is the same operation without a body. */
export function deprecationKey(method: string, relativeTemplate: string): string {
  return `${method === 'HEAD' ? 'GET' : method} ${relativeTemplate}`;
}
