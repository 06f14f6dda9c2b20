import pino, { type DestinationStream, type Logger } from 'pino';
import { createKeyScrubber, redactPaths } from './redaction';
import { NO_TRACE_FIELDS } from './trace-fields';
import { GATEWAY_SERVICE } from './constants';

export type { Logger };

/** What the logger may be given beyond its level and destination. */
export interface LoggerOptions {
  /** The `service` field of every line; the gateway's unless a part of its own says otherwise. */
  service?: string;
  /** Config `keys.prefix`: keys of its family are blanked wherever they turn up in a line. */
  keyPrefix?: string;
  /**
   * The current span's ids for each line (tracing's `logMixin`, see ./telemetry); absent when
   * tracing is off. Given, not imported, so that the logger depends on nothing but redaction.
   */
  traceFields?: { logMixin(mergeObject: object): object } | null;
}

/**
 * stdout written asynchronously: pino's default destination writes each line with a synchronous
 * write(2), which would put one blocking system call on every request's path. Lines written while
 * a write is in flight go out together in the next one (no minimum length, so an idle process
 * still writes a line at once); whatever is left is written synchronously when the process exits.
 */
function asynchronousStdout(): DestinationStream {
  const stdout = pino.destination({ dest: 1, sync: false, minLength: 0 });
  process.once('exit', () => {
    try {
      stdout.flushSync();
    } catch {
      // stdout already closed (a pipe whose reader went away): nothing more can be written.
    }
  });
  return stdout;
}

export function createLogger(level: string, destination: DestinationStream = asynchronousStdout(), options: LoggerOptions = {}): Logger {
  // With tracing on, a line written while a traced request runs carries its trace_id and span_id.
  const traces = options.traceFields ?? null;
  const { scrubString, scrubKeys } = createKeyScrubber(options.keyPrefix);
  return pino(
    {
      ...(traces
        ? {
            mixin: (mergeObject: object) => traces.logMixin(mergeObject),
            // pino's own strategy copies every line into the mixin's object; most lines (unsampled
            // requests, startup) get no ids, and those are written as they are.
            mixinMergeStrategy: (mergeObject: object, mixinObject: object) => (mixinObject === NO_TRACE_FIELDS ? mergeObject : Object.assign(mixinObject, mergeObject)),
          }
        : {}),
      level,
      base: { service: options.service ?? GATEWAY_SERVICE },
      redact: { paths: redactPaths, censor: '[redacted]' },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { log: (object) => scrubKeys(object) as Record<string, unknown> },
      hooks: {
        logMethod(args, method) {
          method.apply(this, args.map((arg) => (typeof arg === 'string' ? scrubString(arg) : arg)) as Parameters<typeof method>);
        },
      },
    },
    destination,
  );
}

/** How long an exit waits for the last log lines to reach stdout. */
const EXIT_FLUSH_LIMIT_MS = 1000;

/**
 * Exits once the lines already logged are written: stdout is written asynchronously, and a line
 * still on its way when the process exits (the last "stopped" or "shutdown failed") would be lost.
 */
export function exitAfterLogs(logger: Logger, code: number): void {
  setTimeout(() => process.exit(code), EXIT_FLUSH_LIMIT_MS);
  logger.flush(() => process.exit(code));
}
