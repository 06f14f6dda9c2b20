import os from 'node:os';
import path from 'node:path';
import fs from 'node:fs';
import pino from 'pino';
import { createLogger, flatLineLogger } from '../src/shared/logger';

/**
 * `npm run bench -- --log-line`: the CPU one request line costs to format, through the logger every
 * other line takes (pino's redaction paths and the key scrub walk) and through the request line's
 * flat-line logger (src/shared/logger.ts). A loop on one core, no server: µs per line, best of 5.
 * The writes themselves are left out (the destination is not ready during the loop, so lines only
 * gather in its buffer); the bench's gateway rows include them.
 */
const LINES = 100_000;

function requestLine(i: number): Record<string, unknown> {
  return {
    requestId: `b1f6c0de-1234-4321-8888-${String(i).padStart(12, '0')}`,
    method: 'GET',
    route: '/v1/pets',
    status: 200,
    durationMs: 1.234,
    upstreamMs: 0.812,
    plan: 'enterprise',
    keyId: 'key_0123456789abcdef01234567',
    clientAddress: '127.0.0.1',
    rateLimit: 'allowed',
    storeFallback: undefined,
  };
}

function microsPerLine(log: (i: number) => void): number {
  let best = Infinity;
  for (let round = 0; round < 5; round++) {
    const before = process.cpuUsage();
    for (let i = 0; i < LINES; i++) log(i);
    const used = process.cpuUsage(before);
    best = Math.min(best, (used.user + used.system) / LINES);
  }
  return best;
}

export function measureLogLine(): void {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'asg-log-line-'));
  try {
    const destination = pino.destination({ dest: path.join(dir, 'lines.log'), sync: false, minLength: 4096 });
    const logger = createLogger('info', destination, { keyPrefix: 'asg_dev_' });
    const flat = flatLineLogger(logger);
    const full = microsPerLine((i) => logger.info(requestLine(i), 'request'));
    const flatMicros = microsPerLine((i) => flat.info(requestLine(i), 'request'));
    process.stdout.write(
      `request line, the logger every line takes: ${full.toFixed(2)} µs\nrequest line, the flat-line logger:        ${flatMicros.toFixed(2)} µs\n`,
    );
    destination.destroy();
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
