import { startTestProduct, type ProductHarness, type ProductHarnessOptions } from '../../support/product-harness';
import { mergeConfig } from '../../../src/shared/config';

/**
 * The decision listener's suites (CONTRACT §11): products with AUTHZ_PORT on a free port, trusting
 * 127.0.0.1 as a proxy (the tests and NGINX all connect from there), and how a proxy asks.
 */

export type { ProductHarness };

/** A deprecated operation past its sunset (POST /pets: 410) beside the default one still served (GET /pets/{petId}). */
export const DEPRECATIONS = [
  {
    method: 'GET',
    path: '/pets/{petId}',
    deprecatedAt: '2025-12-05T00:00:00Z',
    sunset: '2030-12-05T00:00:00Z',
    successor: '/v1/pets',
    docs: 'https://docs.example/get-pet',
  },
  {
    method: 'POST',
    path: '/pets',
    deprecatedAt: '2020-01-01T00:00:00Z',
    sunset: '2021-01-01T00:00:00Z',
    successor: '/v2/pets',
    docs: 'https://docs.example/create-pet',
  },
];

/**
 * The overrides every authz suite starts from: the decision listener on, 127.0.0.1 a trusted proxy,
 * a plan with maxInFlight (which the decision listener does not enforce, and says so), a ban after
 * 2 refusals so that a test reaches one in a few requests, an anonymous limit out of the way.
 */
export const AUTHZ_OVERRIDES = {
  server: { host: '127.0.0.1', authzPort: 0, trustedProxies: ['127.0.0.1'] },
  anonymous: { perMinute: 1000 },
  ban: { threshold: 2, windowSeconds: 60, durationSeconds: 900 },
  plans: { 'one-at-a-time': { perMinute: 1000, perDay: 1000, maxInFlight: 1 } },
  deprecations: DEPRECATIONS,
};

export async function startAuthzProduct(options: ProductHarnessOptions = {}): Promise<ProductHarness> {
  const overrides = mergeConfig(AUTHZ_OVERRIDES as never, (options.overrides ?? {}) as never);
  const product = await startTestProduct({ ...options, overrides: overrides as Record<string, unknown> });
  if (!product.authzUrl) throw new Error('the decision listener did not start');
  return product;
}

/** A decision as the proxy reads it. */
export interface Decision {
  /** Asked NGINX-style: a refusal then comes as 401 or 403, naming its own status in X-Authz-Status. */
  nginx: boolean;
  status: number;
  headers: Headers;
  text: string;
  body: unknown;
}

export interface AskOptions {
  method?: string;
  /** The original target, e.g. /v1/pets?limit=1. */
  target: string;
  auth?: string;
  /** NGINX-style: the line names the decision location, X-Original-Method and X-Original-URI the request. */
  nginx?: boolean;
  headers?: Record<string, string>;
}

/** Asks the decision listener about a request, Envoy-style (the request line is the original) or NGINX-style. */
export async function ask(product: ProductHarness, options: AskOptions): Promise<Decision> {
  const method = options.method ?? 'GET';
  const headers: Record<string, string> = { ...options.headers };
  if (options.auth !== undefined) headers.authorization = options.auth;
  let url = `${product.authzUrl}${options.target}`;
  let lineMethod = method;
  if (options.nginx) {
    headers['x-original-method'] = method;
    headers['x-original-uri'] = options.target;
    url = `${product.authzUrl}/_authz`;
    lineMethod = 'GET';
  }
  const res = await fetch(url, { method: lineMethod, headers });
  const text = await res.text();
  let body: unknown;
  try {
    body = text === '' ? null : JSON.parse(text);
  } catch {
    body = text;
  }
  return { nginx: options.nginx === true, status: res.status, headers: res.headers, text, body };
}

/**
 * The contract's Error body with its status, as `expectError` checks a supertest answer. Asked
 * NGINX-style, the answer's own status is the one `auth_request` passes on quietly (401, else 403),
 * the refusal's is in X-Authz-Status, and the Error body in X-Authz-Error too.
 */
export function expectRefusal(decision: Decision, status: number, code: string, window?: string): void {
  // A 429 rate_limited names the window that refused it (CONTRACT §3), as the public listener's does.
  const refusedBy = code === 'rate_limited' ? { window: window ?? expect.any(String) } : {};
  const body = { code, message: expect.any(String), status, ...refusedBy };
  if (decision.nginx) {
    const sent = status === 401 ? 401 : 403;
    expect({ status: decision.status, decided: decision.headers.get('x-authz-status'), body: decision.body }).toEqual({
      status: sent,
      decided: String(status),
      body,
    });
    expect(JSON.parse(decision.headers.get('x-authz-error') ?? 'null')).toEqual(decision.body);
  } else {
    expect({ status: decision.status, body: decision.body }).toEqual({ status, body });
    expect([decision.headers.get('x-authz-status'), decision.headers.get('x-authz-error')]).toEqual([null, null]);
  }
  expect(decision.headers.get('content-type')).toMatch(/^application\/json/);
}

/** Whether a UTC day ends within `ms`: a burst that must stay inside one day waits it out. */
export async function awayFromDayEnd(ms = 10_000): Promise<void> {
  const left = 86_400_000 - (Date.now() % 86_400_000);
  if (left < ms) await new Promise((resolve) => setTimeout(resolve, left + 200));
}
