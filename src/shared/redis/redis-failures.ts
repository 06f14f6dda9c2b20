import { ApiError } from '../errors';

/**
 * ioredis's own errors for a store that cannot be reached now (no connection, not writable yet,
 * a command that outlived `commandTimeout`), as opposed to a fault of the command itself.
 */
const UNREACHABLE_MESSAGES = [
  "Stream isn't writeable",
  'Connection is closed.',
  'Command timed out',
  'All sentinels are unreachable',
  'Failed to refresh slots cache',
  'None of startup nodes is available',
];

/**
 * Errors Redis answers while it cannot take the command now: during a failover, a load, or a
 * replica's promotion; and LATE, a consume Redis ran past the deadline its caller set, as a timeout
 * (src/limits/redis/command-deadline.ts).
 */
const UNAVAILABLE_REPLIES = /^(READONLY|LOADING|MASTERDOWN|CLUSTERDOWN|TRYAGAIN|LATE) /;

const UNREACHABLE_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENOTCONN']);

/** Whether `err` says the store is unreachable or not serving now (a retry later can succeed). */
export function isRedisUnavailable(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  if (err.name === 'MaxRetriesPerRequestError' || err.name === 'ClusterAllFailedError') return true;
  if (UNREACHABLE_CODES.has((err as NodeJS.ErrnoException).code ?? '')) return true;
  const message = err.message ?? '';
  return UNREACHABLE_MESSAGES.some((start) => message.startsWith(start)) || UNAVAILABLE_REPLIES.test(message);
}

/**
 * The answer to a request that needed the store while it cannot be reached (CONTRACT §3): 503
 * `service_unavailable` with the Error body and Retry-After, never 500; nothing was done.
 */
export class StoreUnreachableError extends ApiError {
  constructor(readonly detail: string) {
    super('service_unavailable', 'The gateway cannot reach its store right now. Retry shortly.', {
      'Retry-After': '1',
    });
    this.name = 'StoreUnreachableError';
  }
}
