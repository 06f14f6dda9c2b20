import type { ServerResponse } from 'node:http';
import type { Http2Stream } from 'node:http2';

/**
 * Why node:http cut a request off mid-flight (its `clientError` code, e.g. ERR_HTTP_REQUEST_TIMEOUT
 * for a body that took longer than server.requestTimeoutMs), for the request's own log line: the
 * listener that learns the reason and the handler that writes the line are apart. Set only on a
 * cut-off, so an ordinary request costs nothing here.
 */
const reasons = new WeakMap<ServerResponse, string>();

export function markCutOff(res: ServerResponse, reason: string): void {
  reasons.set(res, reason);
}

export function cutOffReason(res: ServerResponse): string | undefined {
  return reasons.get(res);
}

/** An HTTP/2 response (node:http2's compatibility API) carries its stream; an HTTP/1.1 one has none. */
function streamOf(res: ServerResponse): Http2Stream | undefined {
  return (res as unknown as { stream?: Http2Stream }).stream;
}

/**
 * Whether the client got the whole answer: the gateway ended it and it was handed over. Not
 * `writableFinished` alone: over HTTP/2 a stream the client resets (RST_STREAM), or whose session
 * closes, reports 'finish' and `writableFinished` at once, answered or not (issue 48); only
 * `writableEnded` says that the gateway itself ended the answer.
 */
export function answeredInFull(res: ServerResponse): boolean {
  return res.writableEnded && res.writableFinished;
}

/** Whether the client is gone already: its connection closed, or its HTTP/2 stream reset or closed with its session. */
export function clientGone(res: ServerResponse): boolean {
  const stream = streamOf(res);
  if (stream) return stream.closed || stream.destroyed;
  return res.closed || res.destroyed;
}

/** Runs `then` once the response has closed: now when it has already (a client gone while the request waited), else on 'close'. */
export function onceClosed(res: ServerResponse, then: () => void): void {
  if (clientGone(res)) then();
  else res.once('close', then);
}

/** Why a request the client left is cut off, for its log line: a closed connection, or a cancelled HTTP/2 stream. */
export function clientLeftReason(res: ServerResponse): string {
  return streamOf(res) ? 'client cancelled the stream' : 'client closed the connection';
}
