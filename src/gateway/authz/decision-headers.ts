import { UPSTREAM_TOKEN_HEADER } from '../../shared/http/upstream-token';

/**
 * The headers of the decision listener's answers (CONTRACT §11). An allowed request's answer names
 * the caller for the proxy to pass upstream, beside the signed token the inventory requires.
 */
export const DECISION_HEADERS = {
  keyId: 'X-Key-Id',
  /** Empty when the key belongs to no consumer: always set, so a proxy that copies it overwrites whatever a client sent. */
  consumerId: 'X-Consumer-Id',
  plan: 'X-Plan',
  token: UPSTREAM_TOKEN_HEADER,
  /**
   * A refusal's status, on a refusal asked NGINX-style: `auth_request` passes a 401 or 403 on to
   * its error page and turns any other status into a 500 (with an error line in NGINX's log), so
   * such a refusal is answered 401 or 403 and names its status here.
   */
  errorStatus: 'X-Authz-Status',
  /**
   * A refusal's Error body, as one line of JSON, on a refusal asked NGINX-style: `auth_request`
   * reads no body from the decision, so its error page answers the client with this one.
   */
  errorBody: 'X-Authz-Error',
} as const;

/** The headers NGINX's `auth_request` sets with the original request's method and target (docs/external-auth.md). */
export const ORIGINAL_METHOD_HEADER = 'x-original-method';
export const ORIGINAL_URI_HEADER = 'x-original-uri';
