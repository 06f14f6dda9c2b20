import type { IncomingMessage } from 'node:http';
import { Refusal } from '../refusals';
import { ORIGINAL_METHOD_HEADER, ORIGINAL_URI_HEADER } from './decision-headers';

/** The request an edge proxy asks about: its method and target, and where they were read. */
export interface OriginalRequest {
  method: string;
  /** The request target as the client sent it (origin form, query included). */
  target: string;
  /**
   * Read from X-Original-Method and X-Original-URI (NGINX `auth_request`, whose subrequest's own
   * line names the decision location); false: the request line itself (Envoy, Gateway API).
   */
  fromHeaders: boolean;
}

/** An HTTP method token (RFC 9110 §9.1), as node:http's parser would accept on a request line. */
const METHOD_TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,32}$/;

const METHOD_MISSING = new Refusal(
  'malformed_request',
  'X-Original-URI came without X-Original-Method: the proxy must send both (docs/external-auth.md).',
);
const METHOD_INVALID = new Refusal('malformed_request', 'X-Original-Method is not an HTTP method.');

/**
 * The original request: from X-Original-Method and X-Original-URI when a trusted proxy sent them,
 * else the request line. Only a trusted proxy's headers are believed, as for X-Forwarded-For: a
 * proxy that passed a client's X-Original-URI on unchanged would otherwise let the client choose
 * which operation is checked, and at what cost, while asking for another.
 */
export function originalRequestOf(req: IncomingMessage, fromTrustedProxy: boolean): OriginalRequest | Refusal {
  const uri = fromTrustedProxy ? single(req.headers[ORIGINAL_URI_HEADER]) : undefined;
  if (uri === undefined) return { method: req.method!, target: req.url ?? '/', fromHeaders: false };
  const method = single(req.headers[ORIGINAL_METHOD_HEADER]);
  if (method === undefined) return METHOD_MISSING;
  if (!METHOD_TOKEN.test(method)) return METHOD_INVALID;
  return { method, target: uri, fromHeaders: true };
}

function single(value: string | string[] | undefined): string | undefined {
  const one = Array.isArray(value) ? value[0] : value;
  return one === undefined || one === '' ? undefined : one;
}
