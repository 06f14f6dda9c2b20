import type { IncomingHttpHeaders } from 'node:http';
import { encodeCursor } from './pagination-cursor';
import type { ListPetsParams } from './validation';

const HOST_PATTERN = /^[A-Za-z0-9.-]+(:[0-9]{1,5})?$|^\[[0-9A-Fa-f:.]+\](:[0-9]{1,5})?$/;

function firstValue(header: string | string[] | undefined): string | undefined {
  const value = Array.isArray(header) ? header[0] : header;
  return value?.split(',')[0]?.trim() || undefined;
}

/**
 * The origin a client used: X-Forwarded-Proto and X-Forwarded-Host when the gateway set them,
 * else plain http and Host. They are believed only because every request that gets this far
 * carries the gateway's signed token.
 */
export function publicOrigin(headers: IncomingHttpHeaders): string {
  const forwardedProto = firstValue(headers['x-forwarded-proto'])?.toLowerCase();
  const proto = forwardedProto === 'https' || forwardedProto === 'http' ? forwardedProto : 'http';
  const forwardedHost = firstValue(headers['x-forwarded-host']);
  const host =
    [forwardedHost, headers.host].find((h): h is string => h !== undefined && HOST_PATTERN.test(h)) ?? 'localhost';
  return `${proto}://${host}`;
}

/** `Link` value (RFC 8288) for the page after `lastId`, keeping the caller's limit and status. */
export function nextPageLink(origin: string, params: ListPetsParams, lastId: number): string {
  const query = new URLSearchParams({ limit: String(params.limit) });
  if (params.status !== undefined) query.set('status', params.status);
  query.set('cursor', encodeCursor(lastId));
  return `<${origin}/v1/pets?${query.toString()}>; rel="next"`;
}
