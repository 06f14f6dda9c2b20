import type { Tracing } from './telemetry-types';
import { TracingConfigError } from './telemetry-types';

/**
 * Tracing (W3C Trace Context, OpenTelemetry; CONTRACT §10) as the rest of the product sees it: a
 * small interface with no OpenTelemetry type in it. Off (no OTLP endpoint) means `tracing()` is null,
 * callers skip their hooks with one null check, and no @opentelemetry module is ever loaded: the
 * SDK lives in ./telemetry-sdk, required only when an endpoint is set.
 */

export * from './telemetry-types';

let installed: Tracing | null = null;

/** The tracing this process started, or null when it is off. Read once at startup by each part. */
export function tracing(): Tracing | null {
  return installed;
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
    const problems =
      err instanceof TracingConfigError ? err.problems : [`cannot start tracing: ${(err as Error).message}`];
    process.stderr.write(problems.map((problem) => `${defaultServiceName}: ${problem}\n`).join(''));
    process.exit(1);
  }
}
