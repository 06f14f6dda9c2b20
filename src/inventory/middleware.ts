import express, { type ErrorRequestHandler, type RequestHandler } from 'express';
import type { Logger } from '../shared/logger';
import { ApiError, sendError, toApiError } from '../shared/errors';
import { StorageUnavailableError } from '../shared/sqlite/sqlite-failures';
import { UPSTREAM_TOKEN_HEADER, type UpstreamTokenVerifier } from '../shared/http/upstream-token';
import { bodyParserForLimit } from '../shared/http/body-limit';
import { requestIdFor } from '../shared/request-id';
import { isJsonContentType } from './validation';

/** Keeps a sane incoming X-Request-Id (the gateway's), else makes one; every response carries it. */
export const requestId: RequestHandler = (req, res, next) => {
  const id = requestIdFor(req.headers['x-request-id']);
  res.locals.requestId = id;
  res.setHeader('X-Request-Id', id);
  next();
};

const GATEWAY_ONLY = 'This service accepts only requests signed by the gateway';

/**
 * Refuses anything without a valid gateway token before a body is read or a row touched: the
 * inventory trusts no one but the gateway (CONTRACT §7).
 */
export function requireGatewayToken(verifier: Pick<UpstreamTokenVerifier, 'verify'>): RequestHandler {
  return async (req, res, next) => {
    const token = req.headers[UPSTREAM_TOKEN_HEADER];
    if (token === undefined || token === '') {
      throw new ApiError('missing_api_key', `${GATEWAY_ONLY}; the ${UPSTREAM_TOKEN_HEADER} header is missing.`);
    }
    const claims = await verifier.verify(Array.isArray(token) ? undefined : token);
    if (!claims) {
      throw new ApiError(
        'invalid_api_key',
        `${GATEWAY_ONLY}; the ${UPSTREAM_TOKEN_HEADER} token is invalid or expired.`,
      );
    }
    res.locals.caller = claims;
    next();
  };
}

/** The last handler of a route: any method it was not given gets 405 with `Allow`. */
export function methodNotAllowed(allowed: readonly string[]): RequestHandler {
  const allow = allowed.join(', ');
  return (req, res) => {
    sendError(res, 'method_not_allowed', `${req.method} is not allowed here; allowed: ${allow}.`, {
      headers: { Allow: allow },
    });
  };
}

export const notFound: RequestHandler = (_req, res) => {
  sendError(res, 'not_found', 'No such resource.');
};

const BODY_REQUIRED = 'The request body is required: send a NewPet as application/json.';

/**
 * Checks what the client announced before anything is read: no body at all is a 400, a body of
 * another media type a 415.
 */
export const requireJsonBody: RequestHandler = (req, _res, next) => {
  const contentLength = req.headers['content-length'];
  const bodyAnnounced =
    req.headers['transfer-encoding'] !== undefined || (contentLength !== undefined && contentLength !== '0');
  if (!bodyAnnounced) throw new ApiError('validation_failed', BODY_REQUIRED);
  if (!isJsonContentType(req.headers['content-type'])) {
    throw new ApiError('unsupported_media_type', 'The request body must be application/json (charset utf-8).');
  }
  next();
};

const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * Reads at most `maxBodyBytes()`, the limit in force (413 beyond), and parses it as JSON into `req.body`. Reading raw
 * bytes, rather than using express.json, keeps each failure distinct: empty (400
 * validation_failed), not UTF-8 or not JSON (400 invalid_json), any JSON value (the schema decides).
 */
export function readJsonBody(maxBodyBytes: () => number): RequestHandler[] {
  const readRaw = bodyParserForLimit(maxBodyBytes, (limit) => express.raw({ type: () => true, limit }));
  const parse: RequestHandler = (req, _res, next) => {
    const raw: unknown = req.body;
    if (!Buffer.isBuffer(raw) || raw.length === 0) throw new ApiError('validation_failed', BODY_REQUIRED);
    let text: string;
    try {
      text = utf8.decode(raw);
    } catch {
      throw new ApiError('invalid_json', 'The request body is not valid UTF-8.');
    }
    try {
      req.body = JSON.parse(text) as unknown;
    } catch {
      throw new ApiError('invalid_json', 'The request body is not valid JSON.');
    }
    next();
  };
  return [readRaw, parse];
}

/** Logs what will become a 500 (with its stack, which the client never sees), then passes it on. */
export function logInternalErrors(logger: Logger): ErrorRequestHandler {
  return (err, req, res, next) => {
    if (err instanceof StorageUnavailableError) {
      // Answered 503 with nothing stored; the reason (SQLITE_FULL: disk full, …) is the operator's.
      logger.error(
        { database: err.database, sqliteCode: err.sqliteCode, detail: err.detail, requestId: res.locals.requestId },
        'write refused: the database cannot take it',
      );
    } else if (toApiError(err).code === 'internal_error') {
      logger.error({ err, requestId: res.locals.requestId, method: req.method, path: req.path }, 'request failed');
    }
    next(err);
  };
}
