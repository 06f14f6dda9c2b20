import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';

/**
 * Tracing (W3C Trace Context, OpenTelemetry; CONTRACT §10) as the rest of the product sees it: a
 * small interface with no OpenTelemetry type in it. Off (no OTLP endpoint) means `tracing()` is null,
 * callers skip their hooks with one null check, and no @opentelemetry module is ever loaded: the
 * SDK lives in ./telemetry-sdk, required only when an endpoint is set.
 */

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
  inventoryMiddleware(routeOf: (res: ServerResponse) => string): (req: IncomingMessage, res: ServerResponse, next: () => void) => void;
  /** One SQLite statement as a child of the current span (none when nothing is being traced). */
  sqliteStatement<T>(statement: string, run: () => T): T;
  /** pino `mixin`: the current span's ids on every line written while a traced request runs. */
  logMixin(mergeObject: object): object;
  /** Exports what is still queued; call on shutdown. */
  shutdown(): Promise<void>;
}

/** What `logMixin` returns for a line outside any sampled span: one shared object, never written to. */
export const NO_TRACE_FIELDS: object = Object.freeze({});

let installed: Tracing | null = null;

/** The tracing this process started, or null when it is off. Read once at startup by each part. */
export function tracing(): Tracing | null {
  return installed;
}

export class TracingConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(problems.join('\n'));
  }
}

/** Whether the standard variables ask for traces: an OTLP endpoint is set and the SDK is not disabled. */
export function tracingRequested(env: NodeJS.ProcessEnv): boolean {
  if ((env.OTEL_SDK_DISABLED ?? '').trim().toLowerCase() === 'true') return false;
  if ((env.OTEL_TRACES_EXPORTER ?? '').trim().toLowerCase() === 'none') return false;
  return Boolean(env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim() || env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim());
}

/**
 * Starts the SDK when the environment asks for it, before the rest of the product is loaded (each
 * entry point calls this first). Throws TracingConfigError for a bad `OTEL_*` value.
 */
export function startTracing(env: NodeJS.ProcessEnv, defaultServiceName: string): Tracing | null {
  if (installed || !tracingRequested(env)) return installed;
  // A plain require on purpose: synchronous, so the SDK is up before the next import runs, and
  // never reached when tracing is off.
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const sdk = require('./telemetry-sdk') as typeof import('./telemetry-sdk');
  installed = sdk.createSdkTracing(env, defaultServiceName);
  return installed;
}

/** For the entry points: start tracing or stop the process with one line per bad setting (CONTRACT §2). */
export function startTracingOrExit(defaultServiceName: string): void {
  try {
    startTracing(process.env, defaultServiceName);
  } catch (err) {
    const problems = err instanceof TracingConfigError ? err.problems : [`cannot start tracing: ${(err as Error).message}`];
    process.stderr.write(problems.map((problem) => `${defaultServiceName}: ${problem}\n`).join(''));
    process.exit(1);
  }
}
