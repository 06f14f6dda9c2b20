import type { ServerResponse } from 'node:http';
import type { GatewayRequest } from './request-context';
import type { Refusal } from './refusals';

/**
 * What every step of the request path answers: go on, the step answered the request itself, or
 * a refusal (./refusals.ts) the handler sends as the contract's Error body. The two markers are
 * shared constants, so a step that lets a request on allocates nothing.
 */
export const CONTINUE = Symbol('continue');
export const ANSWERED = Symbol('answered');
export type StepOutcome = typeof CONTINUE | typeof ANSWERED | Refusal;

/** One step of the request path: every step takes the request as it stands and answers one outcome. */
export type Step = (request: GatewayRequest) => StepOutcome | Promise<StepOutcome>;

export function setHeaders(res: ServerResponse, headers: Readonly<Record<string, string>>): void {
  for (const name in headers) res.setHeader(name, headers[name]!);
}
