import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';

/**
 * Tracing (W3C Trace Context, OpenTelemetry; CONTRACT §10) as the rest of the product sees it: a
 * small interface with no OpenTelemetry type in it, implemented by ./telemetry-sdk and handed out
 * by ./telemetry.
 */

export { NO_TRACE_FIELDS } from './trace-fields';

/** A child span of the gateway's request span; `end` takes what was learned (never a key or key id). */
export interface StepSpan {
  end(attributes?: SpanAttributes, failure?: string): void;
}

export type SpanAttributes = Record<string, string | number | boolean>;

/** The steps of the gateway's chain that get spans of their own. */
export type GatewayStep = 'key lookup' | 'rate limit' | 'forward';

/** What the gateway knows once a request is answered. */
export interface GatewayRequestOutcome {
  statusCode: number;
  /** Route template (`/v1/pets/{petId}`) or `unmatched`. */
  route: string;
  plan: string;
  clientAddress: string;
  rateLimit: string | null;
  /** The contract's Error code when the gateway answered with one itself (401, 429, 404, …). */
  refusal: string | null;
}

/** One public request's SERVER span, continuing the client's `traceparent` when it sent one. */
export interface GatewayRequestSpan {
  /** False when the sampler left this request out: nothing below it is recorded, and `end` has nothing to do. */
  readonly recording: boolean;
  step(name: GatewayStep): StepSpan;
  /** Writes `traceparent` (naming `via`, else this span) and the client's `tracestate` into headers for the inventory. */
  propagate(headers: IncomingHttpHeaders, via: StepSpan): void;
  /** Runs `fn` with this span current, so that log lines written inside carry its ids. */
  run<T>(fn: () => T): T;
  /** `trace_id` and `span_id` for a log line; empty when the request is not sampled. */
  logFields(): { trace_id?: string; span_id?: string };
  end(outcome: GatewayRequestOutcome): void;
}

export interface Tracing {
  startGatewayRequest(req: IncomingMessage): GatewayRequestSpan;
  /**
   * Express-style middleware for the inventory: a SERVER span continuing the gateway's trace, current
   * for everything the request runs (SQLite included); `routeOf` names the route once answered.
   */
  inventoryMiddleware(
    routeOf: (res: ServerResponse) => string,
  ): (req: IncomingMessage, res: ServerResponse, next: () => void) => void;
  /** One SQLite statement as a child of the current span (none when nothing is being traced). */
  sqliteStatement<T>(statement: string, run: () => T): T;
  /** pino `mixin`: the current span's ids on every line written while a traced request runs. */
  logMixin(mergeObject: object): object;
  /** Exports what is still queued; call on shutdown. */
  shutdown(): Promise<void>;
}

export class TracingConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(problems.join('\n'));
  }
}
