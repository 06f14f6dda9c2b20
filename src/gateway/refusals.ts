import type { ErrorBodyFields, ErrorCode } from '../shared/errors';
import type { ApiKeyRecord } from '../keys/types';
import type { RefusingWindow } from '../limits/types';
import { allowHeader, type RouteMatch } from './operations/routes';
import type { UpstreamFailure } from './upstream/forward-contract';

/**
 * Why a step refused the request: the contract's Error code and message, headers of its own, and
 * the status where the contract gives the code two (503 `upstream_unavailable` from the guard).
 * Every refusal of the request path is built here, so the answers a client can get read in one place.
 */
export class Refusal {
  constructor(
    readonly code: ErrorCode,
    readonly message: string,
    readonly headers?: Readonly<Record<string, string>>,
    readonly status?: number,
    /** Fields the Error body adds after `{code, message, status}` (429 rate_limited's `window`). */
    readonly fields?: ErrorBodyFields,
  ) {}
}

// What HTTP/2 hands over that HTTP/1.1's parser never would (steps/check-framing.ts). CONNECT asks
// for a tunnel to its authority; the gateway offers none, so no method is allowed there (an empty Allow).
export const NO_TUNNEL = new Refusal('method_not_allowed', 'CONNECT is not allowed: the gateway opens no tunnels.', {
  Allow: '',
});
export const HOST_NOT_AUTHORITY = new Refusal(
  'malformed_request',
  'The Host header names another authority than :authority.',
);

// Who is calling (steps/authenticate.ts). RFC 9110 §11.6.1: every 401 names the scheme and realm;
// RFC 6750 §3 says why a token was refused.
const REALM = 'Bearer realm="animal-store"';
function bearerChallenge(error: 'invalid_token' | 'invalid_request', description: string): string {
  return `${REALM}, error="${error}", error_description="${description}"`;
}
function unauthorized(
  code: 'missing_api_key' | 'invalid_api_key' | 'revoked_api_key' | 'expired_api_key',
  message: string,
  challenge: string,
): Refusal {
  return new Refusal(code, message, { 'WWW-Authenticate': challenge });
}
const REPEATED_MESSAGE = 'Send exactly one Authorization header.';
const INVALID_MESSAGE = 'The API key is not valid for this environment.';

export const MISSING_KEY = unauthorized(
  'missing_api_key',
  'Send your API key as "Authorization: Bearer <key>".',
  REALM,
);
export const REPEATED_AUTHORIZATION = unauthorized(
  'invalid_api_key',
  REPEATED_MESSAGE,
  bearerChallenge('invalid_request', REPEATED_MESSAGE),
);
export const INVALID_KEY = unauthorized(
  'invalid_api_key',
  INVALID_MESSAGE,
  bearerChallenge('invalid_token', INVALID_MESSAGE),
);
/** Another scheme (Basic, a bare key) sent no bearer token: the challenge alone says what to send (RFC 6750 §3). */
export const NOT_BEARER = unauthorized('invalid_api_key', INVALID_MESSAGE, REALM);
export const REVOKED_KEY = unauthorized(
  'revoked_api_key',
  'This API key has been revoked.',
  bearerChallenge('invalid_token', 'This API key has been revoked.'),
);
export const EXPIRED_KEY = unauthorized(
  'expired_api_key',
  'This API key has expired.',
  bearerChallenge('invalid_token', 'This API key has expired.'),
);

// A key's or its consumer's access policy (steps/check-access.ts, CONTRACT §4).
export const OPERATION_NOT_ALLOWED = new Refusal('operation_not_allowed', 'This API key may not call this operation.');
export const ADDRESS_NOT_ALLOWED = new Refusal(
  'address_not_allowed',
  'This API key may not be used from this address.',
);

// Which operation, and whether it is served (steps/match-operation.ts, steps/check-route.ts, steps/sunset.ts).
export const NOT_A_URL = new Refusal('invalid_parameter', 'The request target is not a valid URL.');
export const OUTSIDE_API = new Refusal('not_found', 'No such resource. The API lives under /v1.');
export const NO_SUCH_RESOURCE = new Refusal('not_found', 'No such resource.');
export const PAST_SUNSET = new Refusal('gone', 'This operation has passed its sunset date. Use the successor version.');

/** 405 with `Allow` for a method the route does not answer. */
export function methodNotAllowed(method: string, route: RouteMatch): Refusal {
  return new Refusal('method_not_allowed', `${method} is not allowed here.`, { Allow: allowHeader(route) });
}

// The limits (steps/limit-anonymous.ts, steps/limit-key.ts, steps/store-failure.ts).
export const STORE_UNAVAILABLE = new Refusal(
  'service_unavailable',
  'The gateway cannot reach its store right now. Retry shortly.',
  { 'Retry-After': '1' },
);

/**
 * What a 429 rate_limited body says refused it (CONTRACT §3): the window as the rate-limit headers
 * name it, `anonymous` for the per-address limit, `hidden` for a window no header names.
 */
export type RefusalWindowName = RefusingWindow | 'anonymous' | 'hidden';

const ANONYMOUS_WINDOW: ErrorBodyFields = { window: 'anonymous' };
const HIDDEN_WINDOW: ErrorBodyFields = { window: 'hidden' };
const WINDOW_FIELDS: Readonly<Record<RefusingWindow, ErrorBodyFields>> = {
  minute: { window: 'minute' },
  day: { window: 'day' },
  month: { window: 'month' },
  'consumer-minute': { window: 'consumer-minute' },
  'consumer-day': { window: 'consumer-day' },
  'consumer-month': { window: 'consumer-month' },
};

export function anonymousRateLimited(retryAfter: string): Refusal {
  return new Refusal(
    'rate_limited',
    'Too many requests without a valid API key from this address.',
    { 'Retry-After': retryAfter },
    undefined,
    ANONYMOUS_WINDOW,
  );
}

/**
 * A key's window refused (steps/limit-key.ts). A hidden one (src/limits/hidden-windows.ts) is named
 * neither in the body nor in the message: the client learns only that it must wait Retry-After.
 */
export function keyRateLimited(refusedBy: RefusingWindow, retryAfter: string, hidden = false): Refusal {
  const headers = { 'Retry-After': retryAfter };
  if (hidden)
    return new Refusal('rate_limited', 'A limit of this API key is used up.', headers, undefined, HIDDEN_WINDOW);
  const what = refusedBy.startsWith('consumer-')
    ? `The ${refusedBy.slice('consumer-'.length)} limit this API key shares with the other keys of its consumer`
    : `The ${refusedBy} limit of this API key`;
  return new Refusal('rate_limited', `${what} is used up.`, headers, undefined, WINDOW_FIELDS[refusedBy]);
}

/** Seconds a key whose plan is not configured is told to wait: the operator's fix takes a reload, not a client's retry loop. */
const UNCONFIGURED_PLAN_RETRY_AFTER_SECONDS = '60';

/**
 * A key with neither limits of its own nor a plan that has some (steps/limit-key.ts,
 * steps/answer-usage.ts): a reload refuses to remove a plan a key uses, but a restart with another
 * config (or an imported record) can still leave one. Its requests are refused, never guessed at
 * and never a 500: the cause is the server's config, not the client, so 503 with a Retry-After,
 * and no unit consumed.
 */
export function unconfiguredPlan(record: Pick<ApiKeyRecord, 'plan'>): Refusal {
  return new Refusal(
    'service_unavailable',
    `The plan ${JSON.stringify(record.plan)} of this API key is not configured on this gateway.`,
    {
      'Retry-After': UNCONFIGURED_PLAN_RETRY_AFTER_SECONDS,
    },
  );
}

/** A key's maxInFlight requests are being forwarded already (CONTRACT §3): no unit taken, no ban counted. */
export const CONCURRENCY_LIMITED = new Refusal(
  'concurrency_limited',
  'This API key has as many requests in progress as its concurrency limit (maxInFlight) allows. Retry when one has been answered.',
  { 'Retry-After': '1' },
);

export function temporarilyBanned(retryAfter: string): Refusal {
  return new Refusal(
    'temporarily_banned',
    'This API key is temporarily banned for retrying after 429 responses. Use exponential backoff.',
    { 'Retry-After': retryAfter },
  );
}

// Forwarding (steps/forward.ts).
export function bodyTooLarge(maxBodyBytes: number): Refusal {
  return new Refusal('payload_too_large', `The request body is larger than ${maxBodyBytes} bytes.`);
}

/** The upstream could not answer (502, 504), or the guard did not send (503): the contract's answer for it. */
export function upstreamRefusal(failure: UpstreamFailure): Refusal {
  return new Refusal(failure.code, failure.message, failure.headers, failure.status);
}
