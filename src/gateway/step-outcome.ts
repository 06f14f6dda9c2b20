import type { ServerResponse } from 'node:http';
import type { ErrorCode } from '../shared/errors';

/**
 * What every step of the request path answers: go on, the step answered the request itself, or
 * a refusal the handler sends as the contract's Error body. The two markers are shared constants,
 * so a step that lets a request on allocates nothing.
 */
export const CONTINUE = Symbol('continue');
export const ANSWERED = Symbol('answered');
export type StepOutcome = typeof CONTINUE | typeof ANSWERED | Refusal;

/** Why a step refused the request: the contract's Error code and message, and headers of its own. */
export class Refusal {
  constructor(
    readonly code: ErrorCode,
    readonly message: string,
    readonly headers?: Readonly<Record<string, string>>,
  ) {}
}

export function setHeaders(res: ServerResponse, headers: Readonly<Record<string, string>>): void {
  for (const name in headers) res.setHeader(name, headers[name]!);
}
