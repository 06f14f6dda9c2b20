import { types } from 'node:util';
import pino, { type DestinationStream, type Logger } from 'pino';
import { NO_TRACE_FIELDS, tracing } from './telemetry';

export type { Logger };

/**
 * Paths pino blanks before a line is written. Keys travel only in Authorization; the censor also
 * covers any field a future change might name after a key or token.
 */
export const redactPaths = [
  'req.headers.authorization',
  'req.headers.cookie',
  'req.headers["x-gateway-token"]',
  'res.headers["set-cookie"]',
  'headers.authorization',
  'authorization',
  'key',
  'apiKey',
  'token',
  'adminToken',
  '*.key',
  '*.apiKey',
  '*.token',
];

/** Anything shaped like one of our API keys, wherever it turns up in a line. */
const API_KEY_LOOKALIKE = /asg_[a-z]+_[A-Za-z0-9]{8,}/g;
const HAS_API_KEY_LOOKALIKE = new RegExp(API_KEY_LOOKALIKE.source);

function scrubString(value: string): string {
  return value.includes('asg_') ? value.replace(API_KEY_LOOKALIKE, '[redacted-key]') : value;
}

/** Key-shaped text replaced, for strings that leave the process elsewhere than in a log line (span attributes). */
export const scrubKeyLookalikes = scrubString;

function isScrubbable(value: object): boolean {
  // Errors go to pino's serializer whole (isNativeError also catches errors from another realm).
  return !(value instanceof Error || types.isNativeError(value));
}

/** Whether anything below `value` holds key-shaped text; a walk that allocates nothing. */
function holdsKeyLookalike(value: unknown, depth: number): boolean {
  if (typeof value === 'string') return value.includes('asg_') && HAS_API_KEY_LOOKALIKE.test(value);
  if (depth > 4 || value === null || typeof value !== 'object' || !isScrubbable(value)) return false;
  const record = value as Record<string, unknown>;
  for (const k in record) if (holdsKeyLookalike(record[k], depth + 1)) return true;
  return false;
}

/**
 * Path redaction covers known fields; this covers a key pasted into any other string, message or
 * nested field. The object comes back as it is unless something in it must change: a request's
 * log line is written for every request and should not be copied for nothing.
 */
export function scrubKeys(value: unknown, depth = 0): unknown {
  if (!holdsKeyLookalike(value, depth)) return value;
  if (typeof value === 'string') return scrubString(value);
  if (Array.isArray(value)) return value.map((v) => scrubKeys(v, depth + 1));
  const scrubbed: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value as object)) scrubbed[k] = scrubKeys(v, depth + 1);
  return scrubbed;
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

export function createLogger(level: string, destination: DestinationStream = asynchronousStdout()): Logger {
  // With tracing on, a line written while a traced request runs carries its trace_id and span_id.
  const traces = tracing();
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
      base: { service: 'animal-store-gateway' },
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
