import type { FallbackKind } from '../limits/types';
import type { GatewayRequestSpan } from '../shared/telemetry';
import type { ErrorCode } from '../shared/errors';
import type { DeprecationNotice } from './operations/deprecation';
import type { RouteMatch } from './operations/routes';

/** How the limiter treated the request, for the log line, the span and the key's usage history. */
export type RateLimitOutcome = 'allowed' | 'limited' | 'banned' | 'shadow_limited' | 'anonymous' | 'anonymous_limited' | 'store_error';

/**
 * What one request has learned on its way through the steps, for the steps after it and for its
 * record (metrics, log line, span). What only one step needs (the key's record) is passed to that
 * step instead of living here.
 */
export interface RequestContext {
  requestId: string;
  startedAt: bigint;
  clientAddress: string;
  /** The target's path (no query), what routing sees; null when the target is not a URL at all. */
  path: string | null;
  /** The target as the inventory gets it: origin form, whatever form the client used. */
  originForm: string;
  route: RouteMatch | null;
  /** The deprecation of this method and route, found once when the route is matched. */
  deprecation: DeprecationNotice | null;
  /** Plan label for metrics and logs: the key's plan, or `anonymous`. */
  plan: string;
  keyId: string | null;
  rateLimitOutcome: RateLimitOutcome | null;
  /** Set when the limit was decided without the shared store (store.failMode `local` or `open`). */
  storeFallback: FallbackKind | null;
  upstreamStartedAt: bigint | null;
  /** Time to the upstream's response headers, for the log line. */
  upstreamMs: number | null;
  /** The request's SERVER span; null when tracing is off. */
  span: GatewayRequestSpan | null;
  /** The Error code a step answered with, for the span. */
  refusedWith: ErrorCode | null;
}

/** A request's context as it starts: what the first look at it learned, and nothing else yet. */
export function newRequestContext(start: {
  requestId: string;
  clientAddress: string;
  path: string | null;
  originForm: string;
  span: GatewayRequestSpan | null;
}): RequestContext {
  return {
    ...start,
    startedAt: process.hrtime.bigint(),
    route: null,
    deprecation: null,
    plan: 'anonymous',
    keyId: null,
    rateLimitOutcome: null,
    storeFallback: null,
    upstreamStartedAt: null,
    upstreamMs: null,
    refusedWith: null,
  };
}
