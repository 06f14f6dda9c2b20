import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ApiKeyRecord } from '../keys/types';
import type { FallbackKind, RefusingWindow } from '../limits/types';
import type { GatewayRequestSpan } from '../shared/telemetry/telemetry';
import type { ErrorCode } from '../shared/errors';
import type { DeprecationNotice } from './operations/deprecation';
import type { RouteMatch } from './operations/routes';
import type { Refusal } from './refusals';

/** How the limiter treated the request, for the log line, the span and the key's usage history. */
export type RateLimitOutcome =
  | 'allowed'
  | 'limited'
  | 'banned'
  | 'concurrency_limited'
  | 'shadow_limited'
  | 'anonymous'
  | 'anonymous_limited'
  | 'store_error';

/**
 * What one request has learned on its way through the steps that its record (metrics, log line,
 * span) reads when its response closes.
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
  /** The window that refused a key's request with 429 rate_limited, hidden or not (the log line is the operator's). */
  refusedByWindow?: RefusingWindow | null;
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

/**
 * A caller without a usable key, as authenticate found it: a key we know that may no longer be used
 * (revoked, expired: its own 401 every time, so its holder learns why), or no key we know (missing,
 * malformed, unknown, another environment's), which the anonymous limit counts against its address
 * (CONTRACT §4).
 */
export interface KeylessCaller {
  /** The 401 the request gets, unless the anonymous limit refuses it first. */
  refusal: Refusal;
  /** A key we know (revoked, expired): its address's window is shown, not spent. */
  known: boolean;
  /** Proven never issued by the local filter of issued keys: its anonymous unit costs the store nothing. */
  neverIssued: boolean;
}

/**
 * One request on its way through the steps, the one thing every step takes: Node's own request and
 * response, and what the steps have learned so far.
 */
export interface GatewayRequest extends RequestContext {
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  /** The method as node:http parsed it. */
  readonly method: string;
  /** The caller's usable key, once authenticate found one; null before, and for every other caller. */
  key: ApiKeyRecord | null;
  /** Why the caller has no usable key, once authenticate looked; null before, and for a caller with one. */
  keyless: KeylessCaller | null;
}

/** What the first look at a request learned: its id, its client, its target, its span. */
export interface RequestStart {
  requestId: string;
  /** The method to decide on, when it is not node:http's (the decision listener: the original request's). */
  method?: string;
  clientAddress: string;
  path: string | null;
  originForm: string;
  span: GatewayRequestSpan | null;
}

/** A request as it starts: what the first look at it learned, and nothing else yet. */
export function newGatewayRequest(req: IncomingMessage, res: ServerResponse, start: RequestStart): GatewayRequest {
  return {
    req,
    res,
    method: start.method ?? req.method!,
    requestId: start.requestId,
    startedAt: process.hrtime.bigint(),
    clientAddress: start.clientAddress,
    path: start.path,
    originForm: start.originForm,
    route: null,
    deprecation: null,
    plan: 'anonymous',
    keyId: null,
    rateLimitOutcome: null,
    refusedByWindow: null,
    storeFallback: null,
    upstreamStartedAt: null,
    upstreamMs: null,
    span: start.span,
    refusedWith: null,
    key: null,
    keyless: null,
  };
}

/**
 * The caller's key record, for the steps after the anonymous limit (which answers every caller
 * without one). Reaching a key step without a key is a bug in the sequence, never a client's doing.
 */
export function keyOf(request: GatewayRequest): ApiKeyRecord {
  if (request.key === null) throw new Error(`request ${request.requestId} reached a key step without a usable key`);
  return request.key;
}
