import type { UpstreamFailure } from './forward-contract';
import { retryAfterSeconds } from '../../shared/retry-after';

/** The code the http-proxy forwarder gives its own socket timeout. */
export const TIMEOUT_CODE = 'ASG_UPSTREAM_TIMEOUT';

/**
 * Maps a socket-level error to the contract's status and code: node:http's codes (the
 * http-proxy-middleware forwarder) and undici's (the undici forwarder) alike.
 */
export function classifyUpstreamError(err: NodeJS.ErrnoException): UpstreamFailure {
  switch (err.code) {
    case TIMEOUT_CODE:
    case 'UND_ERR_CONNECT_TIMEOUT':
    case 'UND_ERR_HEADERS_TIMEOUT':
    case 'UND_ERR_BODY_TIMEOUT':
      return { code: 'upstream_timeout', reason: 'timeout', message: 'The inventory service did not answer in time.' };
    case 'ECONNREFUSED':
    case 'ENOTFOUND':
    case 'EHOSTUNREACH':
    case 'EAI_AGAIN':
      return { code: 'upstream_unavailable', reason: 'refused', message: 'The inventory service is unreachable.' };
    case 'ECONNRESET':
    case 'EPIPE':
    case 'UND_ERR_SOCKET':
    case 'UND_ERR_RES_CONTENT_LENGTH_MISMATCH':
      return { code: 'upstream_unavailable', reason: 'reset', message: 'The inventory service closed the connection.' };
    case 'HPE_INVALID_CONSTANT':
    case 'HPE_INVALID_STATUS':
    case 'HPE_INVALID_HEADER_TOKEN':
    case 'HPE_UNEXPECTED_CONTENT_LENGTH':
    case 'HPE_INVALID_VERSION':
      return {
        code: 'upstream_unavailable',
        reason: 'invalid_response',
        message: 'The inventory service sent an invalid response.',
      };
    default:
      // undici's HTTPParserError may carry no code at all (it looks its llhttp code up the wrong way round).
      if (err.code?.startsWith('HPE_') || err.name === 'HTTPParserError') {
        return {
          code: 'upstream_unavailable',
          reason: 'invalid_response',
          message: 'The inventory service sent an invalid response.',
        };
      }
      return { code: 'upstream_unavailable', reason: 'other', message: 'The inventory service could not be reached.' };
  }
}

/** The guard's refusal when too many requests already wait for the upstream: nothing is sent. */
export const OVERLOADED: UpstreamFailure = {
  code: 'upstream_unavailable',
  status: 503,
  reason: 'overloaded',
  message: 'Too many requests are waiting for the inventory service. Retry shortly.',
  headers: { 'Retry-After': '1' },
};

/** The guard's refusal while the circuit is open: nothing is sent until the cool-down ends. */
export function circuitOpen(retryAfterMs: number): UpstreamFailure {
  return {
    code: 'upstream_unavailable',
    status: 503,
    reason: 'circuit_open',
    message: 'The inventory service is failing; the gateway is not sending it requests for a moment. Retry later.',
    headers: { 'Retry-After': retryAfterSeconds(retryAfterMs) },
  };
}

/** The guard's deadline passed before the upstream's answer began. */
export const DEADLINE_PASSED: UpstreamFailure = {
  code: 'upstream_timeout',
  reason: 'timeout',
  message: 'The inventory service did not answer in time.',
};
