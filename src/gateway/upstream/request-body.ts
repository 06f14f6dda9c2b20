import type { IncomingMessage } from 'node:http';

/** Http2ServerRequest's stream, seen through the compatibility API's IncomingMessage type. */
interface WithStream {
  stream?: { endAfterHeaders?: boolean };
}

/**
 * Whether the request has a body whose length was not declared: HTTP/1.1 chunked, or an HTTP/2
 * stream that stays open after its headers without a Content-Length (HTTP/2 frames the body itself
 * and has no Transfer-Encoding).
 */
export function bodyOfUnknownLength(req: IncomingMessage): boolean {
  if (req.headers['transfer-encoding'] !== undefined) return true;
  if (req.httpVersionMajor !== 2 || req.headers['content-length'] !== undefined) return false;
  return (req as unknown as WithStream).stream?.endAfterHeaders === false;
}

/** A request has a body when it says so: `Content-Length` > 0, or a body of unknown length. */
export function hasBody(req: IncomingMessage): boolean {
  const length = req.headers['content-length'];
  return (length !== undefined && length !== '0') || bodyOfUnknownLength(req);
}
