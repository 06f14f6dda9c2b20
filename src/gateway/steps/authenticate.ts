import type { IncomingMessage } from 'node:http';
import type { KeyResolution } from '../../keys/key-resolver';
import type { ApiKeyRecord } from '../../keys/types';
import type { GatewayMetrics } from '../../shared/metrics';
import type { RequestContext } from '../request-context';
import { Refusal } from '../step-outcome';
import type { StoreCall } from './store-failure';

/** What the gateway needs of the key resolver (src/keys/key-resolver.ts). */
export interface KeyLookup {
  resolve(presentedKey: string): Promise<KeyResolution>;
}

/**
 * Who is calling: a usable key, a key we know that may no longer be used (revoked, expired: its
 * own 401 every time, so its holder learns why), or no key we know (missing, malformed, unknown,
 * another environment's), which the anonymous limit then counts against its address (CONTRACT §4).
 */
export type Caller =
  | { kind: 'key'; record: ApiKeyRecord }
  | { kind: 'known'; refusal: Refusal }
  | { kind: 'unknown'; refusal: Refusal; neverIssued?: boolean };

const BEARER = /^Bearer +([^\s]+) *$/i;

/** RFC 9110 §11.6.1: every 401 names the scheme and realm; RFC 6750 §3 says why a token was refused. */
const REALM = 'Bearer realm="animal-store"';
function bearerChallenge(error: 'invalid_token' | 'invalid_request', description: string): string {
  return `${REALM}, error="${error}", error_description="${description}"`;
}

function unauthorized(code: 'missing_api_key' | 'invalid_api_key' | 'revoked_api_key' | 'expired_api_key', message: string, challenge: string): Refusal {
  return new Refusal(code, message, { 'WWW-Authenticate': challenge });
}

const MISSING = unauthorized('missing_api_key', 'Send your API key as "Authorization: Bearer <key>".', REALM);
const REPEATED_MESSAGE = 'Send exactly one Authorization header.';
const REPEATED = unauthorized('invalid_api_key', REPEATED_MESSAGE, bearerChallenge('invalid_request', REPEATED_MESSAGE));
const INVALID_MESSAGE = 'The API key is not valid for this environment.';
const INVALID = unauthorized('invalid_api_key', INVALID_MESSAGE, bearerChallenge('invalid_token', INVALID_MESSAGE));
// Another scheme (Basic, a bare key) sent no bearer token: the challenge alone says what to send (RFC 6750 §3).
const NOT_BEARER = unauthorized('invalid_api_key', INVALID_MESSAGE, REALM);
const REVOKED = unauthorized('revoked_api_key', 'This API key has been revoked.', bearerChallenge('invalid_token', 'This API key has been revoked.'));
const EXPIRED = unauthorized('expired_api_key', 'This API key has expired.', bearerChallenge('invalid_token', 'This API key has expired.'));

const UNKNOWN_CALLERS = {
  missing: { kind: 'unknown', refusal: MISSING },
  repeated: { kind: 'unknown', refusal: REPEATED },
  invalid: { kind: 'unknown', refusal: INVALID },
  // Proven never issued by the local filter of issued keys: its anonymous unit costs the store nothing.
  neverIssued: { kind: 'unknown', refusal: INVALID, neverIssued: true },
  notBearer: { kind: 'unknown', refusal: NOT_BEARER },
} as const satisfies Record<string, Caller>;
const REVOKED_CALLER: Caller = { kind: 'known', refusal: REVOKED };
const EXPIRED_CALLER: Caller = { kind: 'known', refusal: EXPIRED };

export interface AuthenticateDependencies {
  keyResolver: KeyLookup;
  metrics: GatewayMetrics;
  storeCall: StoreCall;
}

/** `Authorization: Bearer <key>`, checked against the key store (through its cache). */
export function createAuthenticateStep(deps: AuthenticateDependencies) {
  const { metrics, storeCall } = deps;
  const resolve = (presented: string) => () => deps.keyResolver.resolve(presented);
  const describe = (resolution: KeyResolution) => ({ 'asg.key.status': resolution.status });

  return async function authenticate(req: IncomingMessage, request: RequestContext): Promise<Caller | Refusal> {
    const header = req.headers.authorization;
    if (header === undefined || header === '') return failed('missing', UNKNOWN_CALLERS.missing);
    // Node keeps the first of several; which one a client meant is anyone's guess, so none counts.
    if (hasRepeatedAuthorization(req.rawHeaders)) return failed('invalid', UNKNOWN_CALLERS.repeated);
    const presented = BEARER.exec(header)?.[1];
    if (!presented) return failed('invalid', UNKNOWN_CALLERS.notBearer);
    const resolution = await storeCall(request, 'key lookup', resolve(presented), describe);
    if (resolution instanceof Refusal) return resolution;
    switch (resolution.status) {
      case 'valid':
        request.keyId = resolution.record.id;
        request.plan = resolution.record.plan;
        return { kind: 'key', record: resolution.record };
      case 'revoked':
        return failed('revoked', REVOKED_CALLER);
      case 'expired':
        return failed('expired', EXPIRED_CALLER);
      default:
        return failed('invalid', resolution.neverIssued === true ? UNKNOWN_CALLERS.neverIssued : UNKNOWN_CALLERS.invalid);
    }
  };

  function failed(reason: 'missing' | 'invalid' | 'revoked' | 'expired', caller: Caller): Caller {
    metrics.authFailures.inc({ reason });
    return caller;
  }
}

function hasRepeatedAuthorization(rawHeaders: string[]): boolean {
  let seen = 0;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!;
    if (name.length === 13 && name.toLowerCase() === 'authorization' && ++seen > 1) return true;
  }
  return false;
}
