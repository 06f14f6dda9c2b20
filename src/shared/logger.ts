import { types } from 'node:util';
import pino, { type DestinationStream, type Logger } from 'pino';

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

function scrubString(value: string): string {
  return value.includes('asg_') ? value.replace(API_KEY_LOOKALIKE, '[redacted-key]') : value;
}

/** Path redaction covers known fields; this covers a key pasted into any other string, message or nested field. */
export function scrubKeys(value: unknown, depth = 0): unknown {
  if (typeof value === 'string') return scrubString(value);
  // Errors go to pino's serializer whole (isNativeError also catches errors from another realm).
  if (depth > 4 || value === null || typeof value !== 'object' || value instanceof Error || types.isNativeError(value)) return value;
  if (Array.isArray(value)) return value.map((v) => scrubKeys(v, depth + 1));
  const scrubbed: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) scrubbed[k] = scrubKeys(v, depth + 1);
  return scrubbed;
}

export function createLogger(level: string, destination?: DestinationStream): Logger {
  return pino(
    {
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
