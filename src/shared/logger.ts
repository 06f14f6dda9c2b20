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

export function createLogger(level: string, destination?: DestinationStream): Logger {
  return pino(
    {
      level,
      base: { service: 'animal-store-gateway' },
      redact: { paths: redactPaths, censor: '[redacted]' },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    destination,
  );
}
