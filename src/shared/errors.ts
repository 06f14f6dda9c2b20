import type { ServerResponse } from 'node:http';
import type { ErrorRequestHandler } from 'express';

/** Every error code of CONTRACT §3 with its HTTP status. The one place a code meets a status. */
export const codeToStatus = {
  invalid_json: 400,
  validation_failed: 400,
  invalid_parameter: 400,
  malformed_request: 400,
  missing_api_key: 401,
  invalid_api_key: 401,
  revoked_api_key: 401,
  expired_api_key: 401,
  operation_not_allowed: 403,
  address_not_allowed: 403,
  not_found: 404,
  method_not_allowed: 405,
  conflict: 409,
  gone: 410,
  payload_too_large: 413,
  unsupported_media_type: 415,
  headers_too_large: 431,
  rate_limited: 429,
  temporarily_banned: 429,
  concurrency_limited: 429,
  internal_error: 500,
  upstream_unavailable: 502,
  service_unavailable: 503,
  upstream_timeout: 504,
} as const;

export type ErrorCode = keyof typeof codeToStatus;

/**
 * The one code CONTRACT §3 gives two statuses: `upstream_unavailable` is 502 when the inventory
 * could not be reached, 503 (with Retry-After) when the gateway did not try (too many waiting, or
 * its circuit breaker open). sendError takes the status for those.
 */
export const otherStatusesOf: Partial<Record<ErrorCode, readonly number[]>> = { upstream_unavailable: [503] };

export interface ErrorBody {
  code: ErrorCode;
  message: string;
  status: number;
}

/** An error that is safe to show the client: its message is part of the API. */
export class ApiError extends Error {
  readonly status: number;
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = 'ApiError';
    this.status = codeToStatus[code];
  }
}

/** `status` only where the contract gives a code two statuses (502/503 `upstream_unavailable`). */
export function errorBody(code: ErrorCode, message: string, status: number = codeToStatus[code]): ErrorBody {
  return { code, message, status };
}

/** Status line reasons for the raw answers written where no ServerResponse exists. */
const REASON_PHRASES: Partial<Record<number, string>> = { 400: 'Bad Request', 431: 'Request Header Fields Too Large' };

/**
 * The Error body as a whole HTTP/1.1 message, for answering on a bare socket (a request node:http's
 * parser refused, so there is no response object to write to). The connection closes after it.
 */
export function rawErrorResponse(code: ErrorCode, message: string, headers: Record<string, string> = {}): string {
  const body = JSON.stringify(errorBody(code, message));
  const status = codeToStatus[code];
  const lines = [`HTTP/1.1 ${status} ${REASON_PHRASES[status] ?? ''}`.trimEnd()];
  for (const [name, value] of Object.entries(headers)) lines.push(`${name}: ${value}`);
  lines.push(
    'Content-Type: application/json; charset=utf-8',
    `Content-Length: ${Buffer.byteLength(body)}`,
    'Connection: close',
  );
  return `${lines.join('\r\n')}\r\n\r\n${body}`;
}

/** Fields the contract adds to one code's Error body, after `{code, message, status}` (429 rate_limited's `window`). */
export type ErrorBodyFields = Readonly<Record<string, string>>;

/** The Error body with the fields a code adds; those never replace `code`, `message` or `status`. */
export function errorBodyWith(
  code: ErrorCode,
  message: string,
  status: number,
  fields: ErrorBodyFields | undefined,
): ErrorBody {
  const body = errorBody(code, message, status);
  // Spread after the three so they come first in the JSON, then set again so a field never replaces one.
  return fields === undefined ? body : { ...body, ...fields, code, message, status };
}

/** Headers to send with an error, a status other than its code's, and fields its body adds (a refusal may carry all three). */
export interface ErrorResponseOptions {
  headers?: Readonly<Record<string, string>>;
  status?: number;
  fields?: ErrorBodyFields;
}

/**
 * Writes the contract's Error body; the only way any listener answers with an error. Plain
 * node:http, so the gateway's request path and the Express apps (whose responses extend
 * ServerResponse) share it. For HEAD, node:http sends the headers without the body.
 */
export function sendError(
  res: ServerResponse,
  code: ErrorCode,
  message: string,
  options: ErrorResponseOptions = {},
): void {
  const { headers = {}, status = codeToStatus[code], fields } = options;
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const body = JSON.stringify(errorBodyWith(code, message, status, fields));
  for (const name in headers) res.setHeader(name, headers[name]!);
  res.statusCode = status;
  res.setHeader('Content-Type', 'application/json; charset=utf-8');
  res.setHeader('Content-Length', Buffer.byteLength(body));
  res.end(body);
}

/** Maps errors thrown by express and body-parser to contract codes. */
export function toApiError(err: unknown): ApiError {
  if (err instanceof ApiError) return err;
  const e = err as { type?: string; status?: number; statusCode?: number } | null;
  switch (e?.type) {
    case 'entity.parse.failed':
      return new ApiError('invalid_json', 'The request body is not valid JSON.');
    case 'entity.too.large':
      return new ApiError('payload_too_large', 'The request body is too large.');
    case 'encoding.unsupported':
    case 'charset.unsupported':
      return new ApiError('unsupported_media_type', 'The request body encoding or charset is not supported.');
    case 'request.aborted':
      return new ApiError('invalid_json', 'The request body was not received completely.');
    case 'request.size.invalid':
      return new ApiError('invalid_json', 'The request body length does not match Content-Length.');
    default:
      break;
  }
  const status = e?.status ?? e?.statusCode;
  if (status === 400) return new ApiError('invalid_parameter', 'The request is malformed.');
  return new ApiError('internal_error', 'An internal error occurred.');
}

/**
 * The last middleware of every app: shapes any error into the Error body and hides internals
 * on 500 (they are logged by the caller-supplied hook, never sent).
 */
export function errorHandler(onInternal: (err: unknown) => void = () => {}): ErrorRequestHandler {
  return (err, _req, res, _next) => {
    const apiError = toApiError(err);
    if (apiError.code === 'internal_error') onInternal(err);
    sendError(res, apiError.code, apiError.message, { headers: apiError.headers });
  };
}
