import type { IncomingHttpHeaders } from 'node:http';
import { UPSTREAM_TOKEN_HEADER } from '../../shared/http/upstream-token';

/** Request headers that never reach the inventory: credentials, hop-by-hop, and our own internals. */
const STRIPPED_REQUEST_HEADERS = new Set([
  'authorization',
  'proxy-authorization',
  'cookie',
  'connection',
  // The gateway meets (100-continue) or ignores every expectation itself; the inventory sees none.
  'expect',
  'keep-alive',
  'proxy-connection',
  'te',
  'trailer',
  'upgrade',
  'forwarded',
  'x-forwarded-for',
  'x-forwarded-host',
  'x-forwarded-proto',
  'x-real-ip',
]);
const INTERNAL_HEADER_PREFIX = 'x-gateway-';

/** What the gateway adds of its own. */
export interface UpstreamIdentity {
  token: string;
  requestId: string;
  clientAddress: string;
  /** `http` or `https`: how clients reach the gateway (config `server.publicBaseUrl`). */
  forwardedProto: string;
  /** The public host, or null to pass the client's `Host` on. */
  forwardedHost: string | null;
}

/** The client's headers minus credentials, hop-by-hop and internal ones, plus the gateway's own. */
export function upstreamHeaders(incoming: IncomingHttpHeaders, identity: UpstreamIdentity): IncomingHttpHeaders {
  const connectionListed =
    typeof incoming.connection === 'string'
      ? incoming.connection
          .toLowerCase()
          .split(',')
          .map((name) => name.trim())
      : [];
  const headers: IncomingHttpHeaders = {};
  for (const name in incoming) {
    // HTTP/2's pseudo-headers (:method, :path, :authority, :scheme) describe the client's stream, not the request upstream.
    if (
      name.startsWith(':') ||
      STRIPPED_REQUEST_HEADERS.has(name) ||
      name.startsWith(INTERNAL_HEADER_PREFIX) ||
      connectionListed.includes(name)
    )
      continue;
    headers[name] = incoming[name];
  }
  headers[UPSTREAM_TOKEN_HEADER] = identity.token;
  headers['x-request-id'] = identity.requestId;
  headers['x-forwarded-for'] = identity.clientAddress;
  headers['x-forwarded-proto'] = identity.forwardedProto;
  // HTTP/2 names the host in :authority (RFC 9113 §8.3.1); the inventory is reached over HTTP/1.1, which needs Host.
  const clientHost = incoming.host ?? (incoming[':authority'] as string | undefined);
  if (headers.host === undefined && clientHost !== undefined) headers.host = clientHost;
  headers['x-forwarded-host'] = identity.forwardedHost ?? clientHost ?? 'localhost';
  return headers;
}

/** Response headers about the upstream connection, not the answer: node:http writes its own. */
const HOP_BY_HOP_RESPONSE_HEADERS = new Set([
  'connection',
  'keep-alive',
  'transfer-encoding',
  'upgrade',
  'te',
  'trailer',
]);

export function isHopByHopResponseHeader(name: string): boolean {
  return HOP_BY_HOP_RESPONSE_HEADERS.has(name) || name.startsWith('proxy-');
}
