import type { UpstreamFailure } from './forward-contract';

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
      return { code: 'upstream_unavailable', reason: 'invalid_response', message: 'The inventory service sent an invalid response.' };
    default:
      // undici's HTTPParserError may carry no code at all (it looks its llhttp code up the wrong way round).
      if (err.code?.startsWith('HPE_') || err.name === 'HTTPParserError') {
        return { code: 'upstream_unavailable', reason: 'invalid_response', message: 'The inventory service sent an invalid response.' };
      }
      return { code: 'upstream_unavailable', reason: 'other', message: 'The inventory service could not be reached.' };
  }
}
