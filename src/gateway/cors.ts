import type { Config } from '../shared/config';

/** What browser code may read of our answers: the limits, the deprecation notice, the request id. */
const EXPOSED_HEADERS = [
  'X-RateLimit-Limit',
  'X-RateLimit-Remaining',
  'X-RateLimit-Reset',
  'RateLimit-Policy',
  'RateLimit',
  'Retry-After',
  'Deprecation',
  'Sunset',
  'Link',
  'X-Request-Id',
].join(', ');

/** Request headers browser code may send: the key, the body's type, its own request id. */
const ALLOWED_REQUEST_HEADERS = 'Authorization, Content-Type, X-Request-Id';

export interface CorsPolicy {
  /** Headers for a response to `origin` (a listed one), or null: no CORS headers at all. */
  responseHeaders(origin: string | undefined): Record<string, string> | null;
  /** Headers of the gateway's own 204 to a preflight from a listed origin, or null. */
  preflightHeaders(origin: string | undefined, allowedMethods: string): Record<string, string> | null;
}

/**
 * CORS as CONTRACT §3 has it, off unless `cors.allowedOrigins` lists origins. Every header value is
 * written once here; a request only looks its origin up. No cookies are involved (keys travel in
 * Authorization, which browser code sets itself), so credentials are never allowed.
 */
export function createCorsPolicy(config: Config['cors']): CorsPolicy {
  const anyOrigin = config.allowedOrigins.includes('*');
  const listed = new Set(config.allowedOrigins.map((origin) => origin.toLowerCase()));
  const allowed = (origin: string | undefined): origin is string =>
    origin !== undefined && (anyOrigin || listed.has(origin.toLowerCase()));
  // Answers differ by Origin: a cache in between must keep them apart.
  const vary = anyOrigin ? null : 'Origin';

  return {
    responseHeaders(origin) {
      if (!allowed(origin)) return null;
      return {
        'Access-Control-Allow-Origin': anyOrigin ? '*' : origin,
        'Access-Control-Expose-Headers': EXPOSED_HEADERS,
        ...(vary ? { Vary: vary } : {}),
      };
    },
    preflightHeaders(origin, allowedMethods) {
      if (!allowed(origin)) return null;
      return {
        'Access-Control-Allow-Origin': anyOrigin ? '*' : origin,
        'Access-Control-Allow-Methods': allowedMethods,
        'Access-Control-Allow-Headers': ALLOWED_REQUEST_HEADERS,
        'Access-Control-Max-Age': String(config.maxAgeSeconds),
        ...(vary ? { Vary: vary } : {}),
      };
    },
  };
}
