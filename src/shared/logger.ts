import pino, { type DestinationStream, type Logger } from 'pino';
import { createKeyScrubber, redactPaths, type KeyScrubber } from './redaction';
import { NO_TRACE_FIELDS } from './telemetry/trace-fields';
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
 * still writes a line at once, in order with what else the process writes to stdout: the ready
 * banner); whatever is left is written synchronously when the process exits. Gathering 4 KiB per
 * write was tried (issue 27): no gain the bench could see, and lines came after the banner.
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

/**
 * pino's isoTime, made once per millisecond: Date#toISOString was a sixth of a request line's cost,
 * and under load several lines share a millisecond. The text is the same as isoTime's.
 */
function isoTimeOncePerMillisecond(): () => string {
  let lastMs = -1;
  let field = '';
  return () => {
    const now = Date.now();
    if (now !== lastMs) {
      lastMs = now;
      field = `,"time":"${new Date(now).toISOString()}"`;
    }
    return field;
  };
}

/** Each logger's scrubber (children included), for the request-line logger made from it. */
const scrubbers = new WeakMap<Logger, KeyScrubber>();

export function createLogger(
  level: string,
  destination: DestinationStream = asynchronousStdout(),
  options: LoggerOptions = {},
): Logger {
  // With tracing on, a line written while a traced request runs carries its trace_id and span_id.
  const traces = options.traceFields ?? null;
  const scrubber = createKeyScrubber(options.keyPrefix);
  const { scrubString, scrubKeys } = scrubber;
  const logger = pino(
    {
      ...(traces
        ? {
            mixin: (mergeObject: object) => traces.logMixin(mergeObject),
            // pino's own strategy copies every line into the mixin's object; most lines (unsampled
            // requests, startup) get no ids, and those are written as they are.
            mixinMergeStrategy: (mergeObject: object, mixinObject: object) =>
              mixinObject === NO_TRACE_FIELDS ? mergeObject : Object.assign(mixinObject, mergeObject),
          }
        : {}),
      level,
      base: { service: options.service ?? GATEWAY_SERVICE },
      redact: { paths: redactPaths, censor: '[redacted]' },
      timestamp: isoTimeOncePerMillisecond(),
      formatters: { log: (object) => scrubKeys(object) as Record<string, unknown> },
      hooks: {
        logMethod(args, method) {
          // In place: pino made this array for the call (a copy per line would be garbage per request).
          for (let i = 0; i < args.length; i++)
            if (typeof args[i] === 'string') args[i] = scrubString(args[i] as string);
          method.apply(this, args as Parameters<typeof method>);
        },
      },
      onChild: (child) => void scrubbers.set(child, scrubber),
    },
    destination,
  );
  scrubbers.set(logger, scrubber);
  return logger;
}

/**
 * A logger for lines of primitives whose fields are known (the request line, once per request):
 * pino's redaction runs its wildcard paths over every field of every line (a quarter of the
 * request line's cost: `npm run bench -- --log-line`); such a line needs none of it. scrubFlat
 * gives the same guarantee in one pass (no credential-named field, no object, no key-shaped text). A logger made elsewhere (a test's
 * pino) is returned as it is, with its own redaction.
 */
export function flatLineLogger(logger: Logger): Logger {
  const scrubber = scrubbers.get(logger);
  if (!scrubber) return logger;
  return logger.child(
    {},
    {
      redact: { paths: [], censor: '[redacted]' },
      formatters: { log: (line: object) => scrubber.scrubFlat(line as Record<string, unknown>) },
    },
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
