import { createHash, timingSafeEqual } from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';
import { ApiError } from '../shared/errors';
import type { Logger } from '../shared/logger';
import type { Clock } from '../shared/clock';
import { FAILED_TOKEN_DELAY_MS, FailedTokenLimiter } from './failed-tokens';

const ADMIN_REALM = 'Bearer realm="animal-store-admin"';

/** SHA-256 first, so the comparison takes the same time whatever the lengths. */
function tokensEqual(presented: string, expected: string): boolean {
  const a = createHash('sha256').update(presented).digest();
  const b = createHash('sha256').update(expected).digest();
  return timingSafeEqual(a, b);
}

export interface AdminTokenOptions {
  adminToken: string;
  /** Config `admin.failedTokensPerMinute`: per address. */
  failedTokensPerMinute: number;
  /** Config `admin.failedTokensPerMinuteTotal`: over all addresses together. */
  failedTokensPerMinuteTotal: number;
  /** Each refused admin token, with the client's address: gateway_admin_auth_failures_total. */
  onFailedToken?: (reason: 'missing' | 'invalid' | 'locked_out', address: string) => void;
  clock: Clock;
  logger: Logger;
}

/**
 * The admin token, compared in constant time, first: the right token is always served, whatever
 * others have sent (issue 42: a local user could lock the operator out). A refusal carries the
 * challenge (RFC 9110 §11.6.1), is counted and logged with the client's address, and waits
 * FAILED_TOKEN_DELAY_MS; past the bound of its address or of all addresses together
 * (failed-tokens.ts) a wrong token is refused with 429 at once, counted but not logged one by one.
 */
export function requireAdminToken(options: AdminTokenOptions) {
  const failedTokens = new FailedTokenLimiter(
    options.failedTokensPerMinute,
    options.failedTokensPerMinuteTotal,
    options.clock,
  );
  return async function checkAdminToken(req: Request, _res: Response, next: NextFunction): Promise<void> {
    const header = req.headers.authorization;
    const presented = header ? /^Bearer +(\S+) *$/i.exec(header)?.[1] : undefined;
    if (presented !== undefined && tokensEqual(presented, options.adminToken)) return next();

    const address = req.socket.remoteAddress ?? 'unknown';
    const lockedOutForMs = failedTokens.lockedOutForMs(address);
    if (lockedOutForMs > 0) {
      options.onFailedToken?.('locked_out', address);
      throw new ApiError('rate_limited', 'Too many wrong admin tokens from this address. Wait before trying again.', {
        'Retry-After': String(Math.ceil(lockedOutForMs / 1000)),
      });
    }
    const reason = header ? 'invalid' : 'missing';
    const outcome = failedTokens.recordFailure(address);
    options.onFailedToken?.(reason, address);
    options.logger.warn({ reason, clientAddress: address, method: req.method, path: req.path }, 'admin token refused');
    if (outcome.allLockedNow)
      options.logger.error(
        { perMinute: options.failedTokensPerMinuteTotal },
        'wrong admin tokens from all addresses reached their bound: wrong tokens get 429 until the minute ends (the right one is still served)',
      );
    else if (outcome.addressLockedNow)
      options.logger.warn(
        { clientAddress: address, perMinute: options.failedTokensPerMinute },
        'wrong admin tokens from one address reached its bound: its wrong tokens get 429 until its minute ends',
      );
    await new Promise((resolve) => setTimeout(resolve, FAILED_TOKEN_DELAY_MS));
    if (reason === 'missing') {
      throw new ApiError('missing_api_key', 'The admin API needs "Authorization: Bearer <ADMIN_TOKEN>".', {
        'WWW-Authenticate': ADMIN_REALM,
      });
    }
    throw new ApiError('invalid_api_key', 'The admin token is not valid.', {
      'WWW-Authenticate': `${ADMIN_REALM}, error="invalid_token", error_description="The admin token is not valid."`,
    });
  };
}
