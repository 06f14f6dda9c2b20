import type { KeyResolution } from '../../keys/key-resolver';
import type { GatewayMetrics } from '../../shared/metrics/metrics';
import type { GatewayRequest, KeylessCaller } from '../request-context';
import {
  EXPIRED_KEY,
  INVALID_KEY,
  MISSING_KEY,
  NOT_BEARER,
  Refusal,
  REPEATED_AUTHORIZATION,
  REVOKED_KEY,
} from '../refusals';
import { CONTINUE, type StepOutcome } from '../step-outcome';
import type { StoreCall } from './store-failure';

/** What the gateway needs of the key resolver (src/keys/key-resolver.ts). */
export interface KeyLookup {
  resolve(presentedKey: string): Promise<KeyResolution>;
}

const BEARER = /^Bearer +([^\s]+) *$/i;

/** Every way of having no usable key, built once: a request without one allocates nothing here. */
const KEYLESS = {
  missing: { refusal: MISSING_KEY, known: false, neverIssued: false },
  repeated: { refusal: REPEATED_AUTHORIZATION, known: false, neverIssued: false },
  invalid: { refusal: INVALID_KEY, known: false, neverIssued: false },
  // Proven never issued by the local filter of issued keys: its anonymous unit costs the store nothing.
  neverIssued: { refusal: INVALID_KEY, known: false, neverIssued: true },
  notBearer: { refusal: NOT_BEARER, known: false, neverIssued: false },
  revoked: { refusal: REVOKED_KEY, known: true, neverIssued: false },
  expired: { refusal: EXPIRED_KEY, known: true, neverIssued: false },
} as const satisfies Record<string, KeylessCaller>;

export interface AuthenticateDependencies {
  keyResolver: KeyLookup;
  metrics: GatewayMetrics;
  storeCall: StoreCall;
}

/**
 * Who is calling: `Authorization: Bearer <key>`, checked against the key store (through its cache).
 * A usable key is recorded as the request's key; any other caller as keyless, with the 401 it gets
 * unless the anonymous limit refuses it first. Only a store that does not answer refuses here.
 */
export function createAuthenticateStep(deps: AuthenticateDependencies) {
  const { metrics, storeCall } = deps;
  const resolve = (presented: string) => () => deps.keyResolver.resolve(presented);
  const describe = (resolution: KeyResolution) => ({ 'asg.key.status': resolution.status });

  return async function authenticate(request: GatewayRequest): Promise<StepOutcome> {
    const { req } = request;
    const header = req.headers.authorization;
    if (header === undefined || header === '') return keyless(request, 'missing', KEYLESS.missing);
    // Node keeps the first of several; which one a client meant is anyone's guess, so none counts.
    if (hasRepeatedAuthorization(req.rawHeaders)) return keyless(request, 'invalid', KEYLESS.repeated);
    const presented = BEARER.exec(header)?.[1];
    if (!presented) return keyless(request, 'invalid', KEYLESS.notBearer);
    const resolution = await storeCall(request, 'key lookup', resolve(presented), describe);
    if (resolution instanceof Refusal) return resolution;
    switch (resolution.status) {
      case 'valid':
        request.key = resolution.record;
        request.keyId = resolution.record.id;
        request.plan = resolution.record.plan;
        return CONTINUE;
      case 'revoked':
        return keyless(request, 'revoked', KEYLESS.revoked);
      case 'expired':
        return keyless(request, 'expired', KEYLESS.expired);
      default:
        return keyless(request, 'invalid', resolution.neverIssued === true ? KEYLESS.neverIssued : KEYLESS.invalid);
    }
  };

  function keyless(
    request: GatewayRequest,
    reason: 'missing' | 'invalid' | 'revoked' | 'expired',
    caller: KeylessCaller,
  ): StepOutcome {
    metrics.authFailures.inc({ reason });
    request.keyless = caller;
    return CONTINUE;
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
